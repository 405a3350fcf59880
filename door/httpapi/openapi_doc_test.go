package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/door/httpapi"
)

func servedDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// pointer resolves a local reference "#/a/b~1c" in doc.
func pointer(doc any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := doc
	if frag == "" {
		return cur, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch v := cur.(type) {
		case map[string]any:
			if cur, ok = v[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// visit calls f with the JSON pointer of every object in v.
func visit(v any, at string, f func(at string, o map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(at, v)
		for k, e := range v {
			visit(e, at+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), f)
		}
	case []any:
		for i, e := range v {
			visit(e, at+"/"+strconv.Itoa(i), f)
		}
	}
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIDocumentIsSelfContained: the served document is OpenAPI
// 3.1.0; every $ref (and discriminator mapping) resolves inside it; the
// JSON Schema features that would resolve differently inside it ($id,
// $schema, $defs) and the x-inline markers are gone; every operation has
// a unique camelCase operationId.
func TestOpenAPIDocumentIsSelfContained(t *testing.T) {
	doc := servedDoc(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	refs := 0
	visit(doc, "#", func(at string, o map[string]any) {
		for _, k := range []string{"$id", "$schema", "$defs", "x-inline"} {
			if _, ok := o[k]; ok {
				t.Errorf("%s has %s", at, k)
			}
		}
		var targets []any
		if ref, ok := o["$ref"]; ok {
			targets = append(targets, ref)
		}
		if d, ok := o["discriminator"].(map[string]any); ok {
			m, _ := d["mapping"].(map[string]any)
			for _, ref := range m {
				targets = append(targets, ref)
			}
		}
		for _, ref := range targets {
			refs++
			s, _ := ref.(string)
			if _, ok := pointer(doc, s); !ok {
				t.Errorf("%s: $ref %q does not resolve in the document", at, ref)
			}
		}
	})
	if refs < 50 {
		t.Errorf("only %d references seen: is the walk broken?", refs)
	}

	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	seen := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			id, _ := op.(map[string]any)["operationId"].(string)
			switch {
			case id == "":
				t.Errorf("%s has no operationId", route)
			case !camel.MatchString(id):
				t.Errorf("%s: operationId %q is not camelCase", route, id)
			case seen[id] != "":
				t.Errorf("%s and %s share operationId %q", seen[id], route, id)
			}
			seen[id] = route
		}
	}
	for id, route := range map[string]string{"submitJob": "POST /v1/jobs", "getJob": "GET /v1/jobs/{job_id}",
		"listJobs": "GET /v1/jobs", "cancelJob": "DELETE /v1/jobs/{job_id}", "submitTask": "POST /api/v1/tasks"} {
		if seen[id] != route {
			t.Errorf("operationId %s is %q, want %q", id, seen[id], route)
		}
	}
}

// TestOpenAPIInlinesDocsSchemas: RunJobRequest and RunJobResult are the
// schemas of docs/schemas, moved into the document: the same keywords,
// $defs as components.schemas.<Name><Def>.
func TestOpenAPIInlinesDocsSchemas(t *testing.T) {
	got, _ := servedDoc(t)["components"].(map[string]any)["schemas"].(map[string]any)
	for name, file := range map[string][]byte{"RunJobRequest": schemas.RequestJSON, "RunJobResult": schemas.ResultJSON} {
		want := schemas.Raw(file)
		defs, _ := want["$defs"].(map[string]any)
		delete(want, "$defs")
		delete(want, "$id")
		delete(want, "$schema")
		rewrite := func(v any) {
			visit(v, "", func(_ string, o map[string]any) {
				if ref, ok := o["$ref"].(string); ok {
					def, _ := strings.CutPrefix(ref, "#/$defs/")
					o["$ref"] = "#/components/schemas/" + name + strings.ToUpper(def[:1]) + def[1:]
				}
			})
		}
		rewrite(want)
		if diff := cmp.Diff(want, got[name]); diff != "" {
			t.Errorf("components.schemas.%s against docs/schemas (-want +got):\n%s", name, diff)
		}
		if len(defs) == 0 {
			t.Errorf("%s: docs/schemas has no $defs: the hoisting is untested", name)
		}
		for def, schema := range defs {
			rewrite(schema)
			comp := name + strings.ToUpper(def[:1]) + def[1:]
			if diff := cmp.Diff(schema, got[comp]); diff != "" {
				t.Errorf("components.schemas.%s against $defs/%s (-want +got):\n%s", comp, def, diff)
			}
		}
	}
}

// docSchemas compiles components of the served document with a JSON
// Schema 2020-12 validator (OpenAPI 3.1's schema dialect).
type docSchemas struct {
	t *testing.T
	c *jsonschema.Compiler
}

func newDocSchemas(t *testing.T) *docSchemas {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(httpapi.OpenAPI))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///openapi.json", v); err != nil {
		t.Fatal(err)
	}
	return &docSchemas{t, c}
}

// valid reports whether body validates against the schema at ref
// ("#/components/schemas/X").
func (d *docSchemas) valid(ref string, body []byte) bool {
	d.t.Helper()
	s, err := d.c.Compile("mem:///openapi.json" + ref)
	if err != nil {
		d.t.Fatalf("%s: %v", ref, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		d.t.Fatalf("%s: %v", body, err)
	}
	return s.Validate(v) == nil
}

// branches answers which branches of the oneOf of an operation's 200
// response body validates, and the one its discriminator (if any) names.
func (d *docSchemas) branches(path, method string, body []byte) (matched []string, mapped string) {
	d.t.Helper()
	doc := servedDoc(d.t)
	op, _ := pointer(doc, "#/paths/"+strings.ReplaceAll(path, "/", "~1")+"/"+method+"/responses/200/content/application~1json/schema")
	schema, _ := op.(map[string]any)
	oneOf, _ := schema["oneOf"].([]any)
	if len(oneOf) < 2 {
		d.t.Fatalf("%s %s: 200 is not a oneOf: %v", method, path, schema)
	}
	for _, b := range oneOf {
		ref := b.(map[string]any)["$ref"].(string)
		if d.valid(ref, body) {
			matched = append(matched, ref)
		}
	}
	if disc, ok := schema["discriminator"].(map[string]any); ok {
		var fields map[string]any
		json.Unmarshal(body, &fields)
		value, _ := fields[disc["propertyName"].(string)].(string)
		mapped, _ = disc["mapping"].(map[string]any)[value].(string)
	}
	return matched, mapped
}

// TestOpenAPIJobResponsesAreExclusive: real answers of GET and DELETE
// /v1/jobs/{job_id} match exactly one branch of their oneOf, the one the
// discriminator names; the submitted request validates against the
// served RunJobRequest, the listed jobs against JobStatus.
func TestOpenAPIJobResponsesAreExclusive(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("canceler")+" cancel\n"+auth.Hash("root")+" admin\n"), 0o600)
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{tokens: tokens, noWorkers: true})
	d := newDocSchemas(t)
	do := func(method, path, token string, body []byte) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	const (
		active   = "#/components/schemas/ActiveJobStatus"
		result   = "#/components/schemas/RunJobResult"
		terminal = "#/components/schemas/TerminalJobStatus"
	)
	check := func(what, path, method string, body []byte, want string, discriminated bool) {
		t.Helper()
		matched, mapped := d.branches(path, method, body)
		if !slices.Equal(matched, []string{want}) {
			t.Errorf("%s matches %v, want only %s: %s", what, matched, want, body)
		}
		if discriminated && mapped != want {
			t.Errorf("%s: the discriminator names %q, want %s", what, mapped, want)
		}
	}

	req, _ := json.Marshal(e.request([]string{"echo", "hi"}, "echo"))
	if !d.valid("#/components/schemas/RunJobRequest", req) {
		t.Errorf("the request does not validate against the served RunJobRequest: %s", req)
	}
	if d.valid("#/components/schemas/RunJobRequest", []byte(`{"workspace":{"path":"/x"},"command":{"argv":["true"]},"nope":1}`)) {
		t.Error("the served RunJobRequest accepts an unknown field")
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	json.Unmarshal(do("POST", "/v1/jobs", "root", req), &acc)
	check("a queued job's GET", "/v1/jobs/{job_id}", "get", do("GET", "/v1/jobs/"+acc.JobID, "root", nil), active, true)

	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		body := do("GET", "/v1/jobs/"+acc.JobID+"?wait=5s", "root", nil)
		if bytes.Contains(body, []byte(`"started_at"`)) {
			check("a finished job's GET", "/v1/jobs/{job_id}", "get", body, result, true)
			if err := schemas.ValidateResult(body); err != nil {
				t.Errorf("docs/schemas rejects the result: %v", err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the job did not finish: %s", body)
		}
	}
	check("DELETE of a finished job", "/v1/jobs/{job_id}", "delete", do("DELETE", "/v1/jobs/"+acc.JobID, "root", nil), result, false)
	check("DELETE with a cancel-only token", "/v1/jobs/{job_id}", "delete", do("DELETE", "/v1/jobs/"+acc.JobID, "canceler", nil), terminal, false)

	var page struct{ Jobs []json.RawMessage }
	json.Unmarshal(do("GET", "/v1/jobs", "root", nil), &page)
	if len(page.Jobs) != 1 || !d.valid("#/components/schemas/JobStatus", page.Jobs[0]) {
		t.Errorf("listed jobs do not validate against JobStatus: %s", page.Jobs)
	}
}
