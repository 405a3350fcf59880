package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// binary is the agent-runner built for the tests; chrome is the Chromium
// found on the machine ("" when none).
var binary, chrome string

func TestMain(m *testing.M) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	dir, err := os.MkdirTemp("", "uitest-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "agent-runner")
	if out, err := exec.Command("go", "build", "-o", binary, "../../../cmd/agent-runner").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent-runner: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// server is a running `agent-runner serve`.
type server struct {
	url   string
	token string // bearer token the test's own API calls send
	root  string // the workspace root: workspaces and task repositories go here
}

// startServe runs serve on local_process (no root sandbox needed) with
// args added, and waits for /health.
func startServe(t *testing.T, token string, args ...string) *server {
	t.Helper()
	root := t.TempDir()
	os.Chmod(root, 0o755)
	addr := freeAddr(t)
	cmd := exec.Command(binary, append([]string{"serve", "--addr", addr, "--log-level", "warn",
		"--store-dir", filepath.Join(root, "store"), "--workspace-root", root, "--workers", "2", "--shutdown-grace", "1s",
		"--default-backend", "local_process", "--unsafe-local-process"}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	s := &server{url: "http://" + addr, token: token, root: root}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not come up")
		}
	}
}

// call makes an API request with the test's token and decodes a JSON answer into out.
func (s *server) call(t *testing.T, method, path, ctype string, body []byte, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// submitJob queues a job running argv in a fresh workspace with files.
func (s *server) submitJob(t *testing.T, argv []string, extraPolicy string, files map[string]string) string {
	t.Helper()
	ws, err := os.MkdirTemp(s.root, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644)
	}
	a, _ := json.Marshal(argv)
	body := fmt.Sprintf(`{"workspace":{"path":%q},"command":{"argv":%s},"policy":{"allowed_commands":["sh","sleep"],"allow_shell":true%s}}`, ws, a, extraPolicy)
	var acc struct {
		JobID string `json:"job_id"`
	}
	if code := s.call(t, "POST", "/v1/jobs", "application/json", []byte(body), &acc); code != http.StatusAccepted {
		t.Fatalf("submit = %d", code)
	}
	return acc.JobID
}

// jobStatus is the job's status as the API reports it.
func (s *server) jobStatus(t *testing.T, id string) string {
	t.Helper()
	var st struct{ Status string }
	s.call(t, "GET", "/v1/jobs/"+id, "", nil, &st)
	return st.Status
}

// newBrowser starts headless Chromium for one test; it skips the test when
// none is installed.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if chrome == "" {
		t.Skip("no chromium binary found (apt-get install chromium); the dashboard's browser tests need one")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs actions with a deadline, failing the test with what.
func run(t *testing.T, ctx context.Context, what string, d time.Duration, actions ...chromedp.Action) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	defer func() { t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond)) }()
	if err := chromedp.Run(cctx, actions...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is true.
//
// An expression that throws (an element the page has not rendered yet,
// read as null) counts as not yet, not as a failure: the wait goes on
// until the expression holds or the step's time runs out.
func waitJS(expr string) chromedp.Action {
	guarded := "(() => { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			err := chromedp.Poll(guarded, nil, chromedp.WithPollingInterval(50*time.Millisecond)).Do(ctx)
			// A navigation (a Navigate just before, or the page's own)
			// destroys the context the poll was evaluating in: Chrome
			// answers "Cannot find context with specified id" or
			// "Execution context was destroyed". That is "not yet" too;
			// poll again in the new document.
			if err == nil || ctx.Err() != nil || !contextGone(err) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// contextGone reports whether err is Chrome's answer to an evaluation in a
// document a navigation replaced.
func contextGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") || strings.Contains(msg, "Execution context was destroyed")
}

// text returns the text content of the first element matching sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	run(t, ctx, "read "+sel, 10*time.Second, chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel), &s))
	return s
}

// shotDir is where screenshots go: $AGENT_RUNNER_UI_SCREENSHOTS, or a
// temporary directory of the test.
func shotDir(t *testing.T) string {
	if d := os.Getenv("AGENT_RUNNER_UI_SCREENSHOTS"); d != "" {
		os.MkdirAll(d, 0o755)
		return d
	}
	return t.TempDir()
}

var shots = map[*testing.T]string{}

// shot saves a full-page PNG named <test>-<name>.png.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir, ok := shots[t]
	if !ok {
		dir = shotDir(t)
		shots[t] = dir
	}
	var png []byte
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Run(cctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Errorf("write screenshot: %v", err)
		return
	}
	t.Logf("screenshot %s", p)
}

// hashTo moves the open dashboard to another page (#/...) in place: the
// tab keeps its memory, the token included.
func hashTo(hash string) chromedp.Action {
	var ignored any
	return chromedp.Evaluate(fmt.Sprintf(`location.hash = %q`, hash), &ignored)
}
