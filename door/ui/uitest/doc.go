// Package uitest holds the dashboard's end-to-end tests: they build the
// agent-runner binary, start `serve` on local_process, and drive the pages
// in headless Chromium (chromedp). They skip, saying so, when no Chromium
// binary is installed (scripts/test installs Debian's chromium).
package uitest
