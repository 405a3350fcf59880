package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAssembleOpenAPI: x-inline markers become the named schema, its
// $defs components after it and its references to them rewritten; key
// order is kept and <, > and & are not escaped.
func TestAssembleOpenAPI(t *testing.T) {
	src := `{"openapi":"3.1.0","components":{"schemas":{"Z":{"type":"string","description":"a<b"},"Req":{"x-inline":"r.json"},"A":{"type":"object"}}}}`
	file := `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://x/r.json","type":"object",
		"properties":{"n":{"$ref":"#/$defs/limit"},"l":{"type":"array","items":{"$ref":"#/$defs/limit"}}},
		"$defs":{"limit":{"type":"integer","minimum":0},"pair":{"type":"array","items":{"$ref":"#/$defs/limit"}}}}`
	got, err := assembleOpenAPI([]byte(src), map[string][]byte{"r.json": []byte(file)})
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, got); err != nil {
		t.Fatal(err)
	}
	want := `{"openapi":"3.1.0","components":{"schemas":{"Z":{"type":"string","description":"a<b"},` +
		`"Req":{"type":"object","properties":{"n":{"$ref":"#/components/schemas/ReqLimit"},"l":{"type":"array","items":{"$ref":"#/components/schemas/ReqLimit"}}}},` +
		`"ReqLimit":{"type":"integer","minimum":0},"ReqPair":{"type":"array","items":{"$ref":"#/components/schemas/ReqLimit"}},` +
		`"A":{"type":"object"}}}}`
	if compact.String() != want {
		t.Errorf("got  %s\nwant %s", compact.String(), want)
	}
}

func TestAssembleOpenAPIRefuses(t *testing.T) {
	files := map[string][]byte{
		"r.json":       []byte(`{"type":"object","$defs":{"limit":{"type":"integer"}}}`),
		"foreign.json": []byte(`{"properties":{"a":{"$ref":"other.json#/x"}}}`),
	}
	for _, tt := range []struct{ name, src, want string }{
		{"unknown file", `{"components":{"schemas":{"R":{"x-inline":"nope.json"}}}}`, "x-inline"},
		{"marker with more keys", `{"components":{"schemas":{"R":{"x-inline":"r.json","type":"object"}}}}`, "x-inline"},
		{"foreign ref", `{"components":{"schemas":{"R":{"x-inline":"foreign.json"}}}}`, "not one of its own $defs"},
		{"name taken", `{"components":{"schemas":{"R":{"x-inline":"r.json"},"RLimit":{}}}}`, "exists"},
		{"no schemas", `{"components":{}}`, "no components.schemas"},
		{"duplicate key", `{"components":{"schemas":{},"schemas":{}}}`, "duplicate"},
	} {
		if _, err := assembleOpenAPI([]byte(tt.src), files); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.want)
		}
	}
}
