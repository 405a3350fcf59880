package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// decodeArgs decodes a tool's arguments strictly into v: every property
// in required present, no unknown field, every value of its field's JSON
// type. Each problem is a validation.invalid_request naming the field.
func decodeArgs(raw json.RawMessage, required []string, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return job.Errorf(job.CodeInvalidRequest, "arguments must be a JSON object")
	}
	for _, name := range required {
		if _, ok := present[name]; !ok {
			return job.Errorf(job.CodeInvalidRequest, "arguments: %s is required", name).With("field", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e := argsError("", err)
		if path := unknownField(raw, reflect.TypeOf(v), ""); path != "" && strings.HasPrefix(e.Message, "arguments: unknown field") {
			e = unknownFieldError(path)
		}
		return e
	}
	return nil
}

// unknownField is the path ("limits.timeout", "caches[0].dir") of the
// first field of raw that t has no field for, or "" when there is none.
// encoding/json names only the field itself.
func unknownField(raw json.RawMessage, t reflect.Type, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "" // decodes itself
	}
	switch t.Kind() {
	case reflect.Slice:
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		for i, item := range items {
			if p := unknownField(item, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i)); p != "" {
				return p
			}
		}
	case reflect.Struct:
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(raw, &obj)
		names := slices.Sorted(maps.Keys(obj))
		for _, name := range names {
			f, ok := fieldNamed(t, name)
			if !ok {
				return prefix + name
			}
			if p := unknownField(obj[name], f.Type, prefix+name+"."); p != "" {
				return p
			}
		}
	}
	return ""
}

// fieldNamed is t's field that JSON key name decodes into (matched as
// encoding/json does, case-insensitively).
func fieldNamed(t reflect.Type, name string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if strings.EqualFold(tag, name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func unknownFieldError(path string) *job.Error {
	return job.Errorf(job.CodeInvalidRequest, "arguments: unknown field %q (tools/list gives the tool's input schema)", path).With("field", path)
}

// argsError says what is wrong with the arguments in the tool's terms
// (argument names, after prefix, and JSON types), not in Go's.
func argsError(prefix string, err error) *job.Error {
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		field := strings.TrimSuffix(prefix+typ.Field, ".")
		if field == "" {
			field = "(the arguments)"
		}
		return job.Errorf(job.CodeInvalidRequest, "arguments: %s: got a JSON %s, want %s", field, typ.Value, jsonType(typ.Type)).With("field", field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return job.Errorf(job.CodeInvalidRequest, "arguments are not valid JSON: they end early")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return unknownFieldError(prefix + strings.Trim(name, `"`))
	}
	// A value's own decoder (an allowed_commands entry, say) refused it.
	return job.Errorf(job.CodeInvalidRequest, "arguments: %s", msg)
}

// jsonType names a Go type as the JSON it decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

// decodePolicy decodes sandbox.run's policy argument (an object, so that
// allowed_commands may mix strings and objects as in a RunJobRequest)
// strictly into a job.Policy; a problem names its policy.* field.
func decodePolicy(m map[string]any) (job.Policy, error) {
	b, _ := json.Marshal(m)
	var p job.Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return job.Policy{}, argsError("policy.", err)
	}
	return p, nil
}
