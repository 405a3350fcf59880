package imageapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/image"
	"github.com/agent-runner/agent-runner/image/imagetest"
	"github.com/agent-runner/agent-runner/job"
)

type answer struct {
	status int
	code   job.Code
	body   map[string]any
}

func serve(t *testing.T, maxBytes int64) (*httptest.Server, []string) {
	t.Helper()
	s, err := image.Open(image.Config{Dir: filepath.Join(t.TempDir(), "images")})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	var scopes []string
	(&Door{Store: s, MaxBytes: maxBytes}).Routes(mux, func(scope string, h http.Handler) http.Handler {
		scopes = append(scopes, scope)
		return h
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, scopes
}

func do(t *testing.T, method, url string, body io.Reader) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	a.status = resp.StatusCode
	json.NewDecoder(resp.Body).Decode(&a.body)
	if e, ok := a.body["error"].(map[string]any); ok {
		a.code = job.Code(e["code"].(string))
	}
	return a
}

func upload(t *testing.T, url, archive string) answer {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return do(t, "POST", url, f)
}

func TestImagesRoutes(t *testing.T) {
	srv, scopes := serve(t, 0)
	for _, s := range scopes {
		if s != "admin" {
			t.Errorf("a route is mounted with scope %q; want admin", s)
		}
	}
	archive := imagetest.DockerArchive(t, map[string]string{"etc/motd": "hi\n"})
	a := upload(t, srv.URL+"/v1/images?tag=registry.test/team/tool:1", archive)
	if a.status != 201 {
		t.Fatalf("POST /v1/images = %d %v", a.status, a.body)
	}
	images := a.body["images"].([]any)
	digest := images[0].(map[string]any)["digest"].(string)
	if a := do(t, "GET", srv.URL+"/v1/images", nil); a.status != 200 || len(a.body["images"].([]any)) != 1 {
		t.Errorf("GET /v1/images = %d %v", a.status, a.body)
	}
	for _, ref := range []string{"registry.test/team/tool:1", digest} {
		if a := do(t, "GET", srv.URL+"/v1/images/"+ref, nil); a.status != 200 || a.body["digest"] != digest {
			t.Errorf("GET /v1/images/%s = %d %v", ref, a.status, a.body)
		}
	}
	if a := do(t, "GET", srv.URL+"/v1/images/absent:1", nil); a.status != 404 || a.code != job.CodeImageNotFound {
		t.Errorf("GET of an absent image = %d %s", a.status, a.code)
	}
	if a := do(t, "GET", srv.URL+"/v1/images/Not%20A%20Name", nil); a.status != 422 || a.code != job.CodeInvalidRequest {
		t.Errorf("GET of a malformed ref = %d %s", a.status, a.code)
	}
	if a := do(t, "DELETE", srv.URL+"/v1/images/registry.test/team/tool:1", nil); a.status != 200 || a.body["digest"] != digest {
		t.Errorf("DELETE = %d %v", a.status, a.body)
	}
	if a := do(t, "GET", srv.URL+"/v1/images/"+digest, nil); a.status != 404 {
		t.Errorf("GET after DELETE of the last tag = %d; want 404", a.status)
	}
}

func TestImportRefusals(t *testing.T) {
	srv, _ := serve(t, 32<<10)
	tests := []struct {
		name    string
		archive string
		status  int
		code    job.Code
	}{
		{"dotdot entry", imagetest.DockerArchive(t, map[string]string{"../escape": "x"}), 422, job.CodeImageUnsafeEntry},
		{"over the upload cap", imagetest.DockerArchive(t, map[string]string{"big": strings.Repeat("x", 64<<10)}), 413, job.CodeBodyTooLarge},
		{"not an archive", writeFile(t, "not a tar at all"), 422, job.CodeImageInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a := upload(t, srv.URL+"/v1/images", tt.archive); a.status != tt.status || a.code != tt.code {
				t.Errorf("POST = %d %s; want %d %s (%v)", a.status, a.code, tt.status, tt.code, a.body)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte(content), 0o644)
	return p
}
