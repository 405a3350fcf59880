package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/docs/schemas"
)

// openAPISource is the hand-written part of the document: every route of
// table() (a test checks that the two agree) and every schema but the two
// that docs/schemas owns, which it marks {"x-inline": "<file>"}.
//
//go:embed openapi.json
var openAPISource []byte

// inlined are the JSON Schemas an x-inline marker may name: the request
// and result schemas of docs/schemas, so the served document and the
// validator share one source.
var inlined = map[string][]byte{
	"request.schema.json": schemas.RequestJSON,
	"result.schema.json":  schemas.ResultJSON,
}

// OpenAPI is the OpenAPI 3.1 document GET /openapi.json serves:
// openapi.json with each x-inline marker replaced by the JSON Schema it
// names.
var OpenAPI = mustAssemble(openAPISource, inlined)

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(OpenAPI)
}

func mustAssemble(src []byte, files map[string][]byte) []byte {
	doc, err := assembleOpenAPI(src, files)
	if err != nil {
		panic("httpapi: openapi.json: " + err.Error())
	}
	return doc
}

// assembleOpenAPI replaces every components.schemas entry of src that is
// {"x-inline": file} by the JSON Schema files[file]. OpenAPI 3.1 schemas
// are JSON Schema 2020-12, so the schema goes in as it is but for what
// would resolve differently inside the larger document: $schema and $id
// are dropped (an $id would make "#/..." references resolve against the
// schema instead of the document, which generators do not follow), and
// each $defs entry moves to components.schemas, after the schema, as
// <Name><Def> (RunJobResultSha256), with its "#/$defs/<def>" references
// rewritten to match. Key order is kept, so the served document reads as
// openapi.json does.
func assembleOpenAPI(src []byte, files map[string][]byte) ([]byte, error) {
	root, err := decodeOrdered(src)
	if err != nil {
		return nil, err
	}
	doc, ok := root.(*object)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	comps, _ := doc.get("components").(*object)
	schemaSet, _ := comps.get("schemas").(*object)
	if schemaSet == nil {
		return nil, fmt.Errorf("no components.schemas")
	}
	var out, hoisted []member
	for _, m := range schemaSet.members {
		marker, ok := m.value.(*object)
		if !ok || marker.get("x-inline") == nil {
			out = append(out, m)
			continue
		}
		file, _ := marker.get("x-inline").(string)
		raw, ok := files[file]
		if !ok || len(marker.members) != 1 {
			return nil, fmt.Errorf("components.schemas.%s: x-inline must be the only key and name one of the embedded schemas, not %q", m.key, file)
		}
		v, err := decodeOrdered(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		schema, ok := v.(*object)
		if !ok {
			return nil, fmt.Errorf("%s: not a JSON object", file)
		}
		defs, _ := schema.get("$defs").(*object)
		schema.drop("$schema", "$id", "$defs")
		refs := map[string]string{}
		var own []member
		if defs != nil {
			for _, d := range defs.members {
				if d.key == "" {
					return nil, fmt.Errorf("%s: a $defs entry has an empty name", file)
				}
				name := m.key + strings.ToUpper(d.key[:1]) + d.key[1:]
				if schemaSet.get(name) != nil || slices.ContainsFunc(hoisted, func(h member) bool { return h.key == name }) {
					return nil, fmt.Errorf("%s: $defs/%s would be components.schemas.%s, which exists", file, d.key, name)
				}
				refs["#/$defs/"+d.key] = "#/components/schemas/" + name
				own = append(own, member{name, d.value})
			}
		}
		var bad error
		rewrite := func(o *object) {
			for j, f := range o.members {
				if f.key != "$ref" {
					continue
				}
				ref, _ := f.value.(string)
				if to, ok := refs[ref]; ok {
					o.members[j].value = to
				} else if bad == nil {
					bad = fmt.Errorf("%s: $ref %q is not one of its own $defs", file, ref)
				}
			}
		}
		walk(schema, rewrite)
		for _, h := range own {
			walk(h.value, rewrite)
		}
		if bad != nil {
			return nil, bad
		}
		out = append(out, member{m.key, schema})
		out = append(out, own...)
		hoisted = append(hoisted, own...)
	}
	schemaSet.members = out
	var compact bytes.Buffer
	if err := encodeOrdered(&compact, doc); err != nil {
		return nil, err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, compact.Bytes(), "", " "); err != nil {
		return nil, err
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

// object is a JSON object that keeps its keys' order.
type object struct{ members []member }

type member struct {
	key   string
	value any
}

func (o *object) get(key string) any {
	if o == nil {
		return nil
	}
	for _, m := range o.members {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

func (o *object) drop(keys ...string) {
	kept := o.members[:0]
	for _, m := range o.members {
		if !slices.Contains(keys, m.key) {
			kept = append(kept, m)
		}
	}
	o.members = kept
}

// walk calls f on every object in v, v included.
func walk(v any, f func(*object)) {
	switch v := v.(type) {
	case *object:
		f(v)
		for _, m := range v.members {
			walk(m.value, f)
		}
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

// decodeOrdered decodes one JSON value: objects as *object, arrays as
// []any, numbers as json.Number and the rest as encoding/json does.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if o.get(k.(string)) != nil {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			o.members = append(o.members, member{k.(string), v})
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// encodeOrdered writes v as compact JSON, not escaping <, > and & (the
// document's descriptions hold them).
func encodeOrdered(w *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case *object:
		w.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := encodeOrdered(w, m.key); err != nil {
				return err
			}
			w.WriteByte(':')
			if err := encodeOrdered(w, m.value); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := encodeOrdered(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	default:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		w.Truncate(w.Len() - 1) // Encode's newline
	}
	return nil
}
