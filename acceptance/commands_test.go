package acceptance

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agent-runner/agent-runner/image/imagetest"
)

// commands are the scripts' own commands.
var commands = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"serve":     cmdServe,
	"stopserve": cmdStopServe,
	"http":      cmdHTTP,
	"jsonvar":   cmdJSONVar,
	"waitjson":  cmdWaitJSON,
	"gitrepo":   cmdGitRepo,
	"mcpcall":   cmdMCPCall,
	"freeport":  cmdFreePort,
	"terminal":  cmdTerminal,
	"e2bsdk":    cmdE2BSDK,
	"imagetar":  cmdImageTar,
}

// server is a serve process a script started.
type server struct {
	cmd  *exec.Cmd
	done chan error
}

// servers maps a script's work directory to its running serve (scripts
// run in parallel: every access holds serversMu).
var (
	serversMu sync.Mutex
	servers   = map[string]*server{}
)

func serverOf(work string) *server {
	serversMu.Lock()
	defer serversMu.Unlock()
	return servers[work]
}

func setServer(work string, s *server) {
	serversMu.Lock()
	defer serversMu.Unlock()
	if s == nil {
		delete(servers, work)
		return
	}
	servers[work] = s
}

// cmdServe starts `agent-runner serve` in $WORK on a free loopback port
// with --store-dir $WORK/store and an admin token (unless -notoken), the
// rest of the arguments passed on, and waits for /health. It sets URL,
// AGENT_RUNNER_URL and AGENT_RUNNER_TOKEN, and writes serve's output to
// $WORK/serve.log.
//
//	serve [-notoken] [-port=N] [serve flags...]
func cmdServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("serve does not take !")
	}
	// Its own flags come first; the rest go to serve as they are.
	noToken, port := new(bool), new(int)
	for len(args) > 0 {
		if args[0] == "-notoken" {
			*noToken = true
		} else if v, ok := strings.CutPrefix(args[0], "-port="); ok {
			*port, _ = strconv.Atoi(v)
		} else {
			break
		}
		args = args[1:]
	}
	work := ts.Getenv("WORK")
	if serverOf(work) != nil {
		ts.Fatalf("serve is already running (stopserve first)")
	}
	if *port == 0 {
		*port, _ = strconv.Atoi(ts.Getenv("PORT"))
	}
	if *port == 0 {
		*port = freePort(ts)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", *port)
	argv := []string{"serve", "--addr", addr, "--store-dir", filepath.Join(work, "store"), "--log-level", "warn"}
	token := ts.Getenv("AGENT_RUNNER_TOKEN")
	if !*noToken {
		if token == "" {
			token = newToken(ts)
		}
		tokens := filepath.Join(work, ".tokens")
		sum := sha256.Sum256([]byte(token))
		ts.Check(os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" admin acceptance\n"), 0o600))
		argv = append(argv, "--token-file", tokens)
	}
	argv = append(argv, args...)
	cmd := exec.Command(filepath.Join(binDir, "agent-runner"), argv...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	logf, err := os.OpenFile(filepath.Join(work, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	ts.Check(err)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ts.Check(cmd.Start())
	s := &server{cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	setServer(work, s)
	ts.Defer(func() { stop(s, syscall.SIGKILL); setServer(work, nil) })
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(filepath.Join(work, "serve.log"))
			ts.Fatalf("serve exited before it was ready (%v):\n%s", err, log)
		default:
		}
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			ts.Fatalf("serve not ready at %s after 60 s", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Setenv("PORT", strconv.Itoa(*port))
	ts.Setenv("URL", url)
	ts.Setenv("AGENT_RUNNER_URL", url)
	if !*noToken {
		ts.Setenv("AGENT_RUNNER_TOKEN", token)
	}
}

// cmdStopServe stops the script's serve: SIGTERM (a graceful shutdown),
// or SIGKILL with -kill (a crash).
func cmdStopServe(ts *testscript.TestScript, neg bool, args []string) {
	s := serverOf(ts.Getenv("WORK"))
	if s == nil {
		ts.Fatalf("no serve is running")
	}
	sig := syscall.SIGTERM
	if len(args) == 1 && args[0] == "-kill" {
		sig = syscall.SIGKILL
	}
	stop(s, sig)
	setServer(ts.Getenv("WORK"), nil)
}

func stop(s *server, sig syscall.Signal) {
	if s.cmd.Process == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, sig)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(30 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// cmdHTTP makes a request to the script's serve with its token, prints
// the response body on stdout (and with -show one response header on
// stderr) and checks the status.
//
//	http [-status=N] [-ct=TYPE] [-token=T] [-origin=O] [-host=H] [-header="Name: value"] [-show=Name] METHOD PATH [BODYFILE]
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	want := fs.Int("status", 0, "wanted status (0: any 2xx)")
	ct := fs.String("ct", "", "content type of the body (default application/json)")
	token := fs.String("token", "\x00", "bearer token (default $AGENT_RUNNER_TOKEN; empty: none)")
	origin := fs.String("origin", "", "Origin header")
	host := fs.String("host", "", "Host header")
	header := fs.String("header", "", "one more header, \"Name: value\"")
	show := fs.String("show", "", "a response header to print to stderr as \"Name: value\"")
	ts.Check(fs.Parse(args))
	if fs.NArg() < 2 || fs.NArg() > 3 {
		ts.Fatalf("usage: http [flags] METHOD PATH [BODYFILE]")
	}
	var body io.Reader
	if fs.NArg() == 3 {
		body = strings.NewReader(ts.ReadFile(fs.Arg(2)))
		if *ct == "" {
			*ct = "application/json"
		}
	}
	req, err := http.NewRequest(fs.Arg(0), ts.Getenv("URL")+fs.Arg(1), body)
	ts.Check(err)
	if *ct != "" && *ct != "none" {
		req.Header.Set("Content-Type", *ct)
	}
	if *token == "\x00" {
		*token = ts.Getenv("AGENT_RUNNER_TOKEN")
	}
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	if *origin != "" {
		req.Header.Set("Origin", *origin)
	}
	if *host != "" {
		req.Host = *host
	}
	if *header != "" {
		name, value, ok := strings.Cut(*header, ":")
		if !ok {
			ts.Fatalf("http -header %q: want \"Name: value\"", *header)
		}
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	ts.Stdout().Write(b)
	fmt.Fprintf(ts.Stderr(), "status %d\n", resp.StatusCode)
	if *show != "" {
		fmt.Fprintf(ts.Stderr(), "%s: %s\n", *show, resp.Header.Get(*show))
	}
	ok := resp.StatusCode/100 == 2
	if *want != 0 {
		ok = resp.StatusCode == *want
	}
	if ok == neg {
		ts.Fatalf("%s %s: status %d (want %d):\n%s", fs.Arg(0), fs.Arg(1), resp.StatusCode, *want, b)
	}
}

// cmdJSONVar sets VAR to a field of the last command's stdout (JSON), or
// of FILE: a dotted path, list elements by index (artifacts.0.path).
//
//	jsonvar VAR PATH [FILE]
func cmdJSONVar(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: jsonvar VAR PATH [FILE]")
	}
	file := "stdout"
	if len(args) == 3 {
		file = args[2]
	}
	v, err := jsonField([]byte(ts.ReadFile(file)), args[1])
	if err != nil {
		ts.Fatalf("jsonvar %s: %v", args[1], err)
	}
	ts.Setenv(args[0], v)
}

// cmdWaitJSON polls GET PATH until the JSON field matches the pattern
// (with -not: until it is there and does not match; default timeout 90
// s), and prints the last answer.
//
//	waitjson [-timeout=D] [-not] PATH FIELD PATTERN
func cmdWaitJSON(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("waitjson", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 90*time.Second, "give up after")
	not := fs.Bool("not", false, "wait until the field does not match")
	ts.Check(fs.Parse(args))
	if fs.NArg() != 3 {
		ts.Fatalf("usage: waitjson [-timeout=D] [-not] PATH FIELD PATTERN")
	}
	re, err := regexp.Compile(fs.Arg(2))
	ts.Check(err)
	deadline := time.Now().Add(*timeout)
	var last []byte
	for {
		req, _ := http.NewRequest("GET", ts.Getenv("URL")+fs.Arg(0), nil)
		if tok := ts.Getenv("AGENT_RUNNER_TOKEN"); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			last, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if v, err := jsonField(last, fs.Arg(1)); err == nil && re.MatchString(v) != *not {
				ts.Stdout().Write(last)
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: %s did not match %q (not: %v) in %s; last answer:\n%s", fs.Arg(0), fs.Arg(1), fs.Arg(2), *not, *timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cmdGitRepo creates a git repository at DIR (branch main) with one
// commit of the files given as NAME=CONTENT.
//
//	gitrepo DIR [NAME=CONTENT...]
func cmdGitRepo(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: gitrepo DIR [NAME=CONTENT...]")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	files := args[1:]
	if len(files) == 0 {
		files = []string{"README.md=hello"}
	}
	for _, f := range files {
		name, content, _ := strings.Cut(f, "=")
		ts.Check(os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644))
	}
	for _, argv := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.email=a@example.com", "-c", "user.name=acceptance", "commit", "-qm", "initial"},
	} {
		cmd := exec.Command("git", argv...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			ts.Fatalf("git %v: %v\n%s", argv, err, out)
		}
	}
}

// jsonField reads a dotted path out of a JSON document; strings come out
// bare, anything else as JSON.
func jsonField(doc []byte, path string) (string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return "", fmt.Errorf("not JSON: %v: %.200s", err, doc)
	}
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return "", fmt.Errorf("no %q in %.300s", key, doc)
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("no element %q in %.300s", key, doc)
			}
			v = x[i]
		default:
			return "", fmt.Errorf("no %q in %.300s", key, doc)
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, _ := json.Marshal(v)
	return string(bytes.TrimSpace(b)), nil
}

// scriptEnv is the environment a script's commands see.
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "WORK", "REPO"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	// The variables the docs export before starting serve, when a script
	// sets them.
	for _, k := range []string{"AGENT_RUNNER_NATS_TOKEN"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// cmdFreePort sets VAR to a free loopback TCP port (for a listener a
// script starts itself: a NATS port, a web server).
//
//	freeport VAR
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	ts.Setenv(args[0], strconv.Itoa(freePort(ts)))
}

func freePort(ts *testscript.TestScript) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newToken(ts *testscript.TestScript) string {
	b := make([]byte, 16)
	_, err := rand.Read(b)
	ts.Check(err)
	return "acc-" + hex.EncodeToString(b)
}

// bearerClient sends token on every request (none when empty).
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// cmdImageTar writes a docker save archive of one image, one layer with
// the files named (path=content; content "->T" is a symlink to T, "@F" a
// copy of host file F, executable), for the image store's scripts.
//
//	imagetar FILE [path=content...]
func cmdImageTar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: imagetar FILE [path=content...]")
	}
	files := map[string]string{}
	for _, a := range args[1:] {
		p, content, _ := strings.Cut(a, "=")
		files[p] = content
	}
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	ts.Check(imagetest.WriteDockerArchive(f, files))
}
