// Package schemas publishes the JSON Schemas of RunJobRequest and
// RunJobResult (the files beside this one, linked from docs/api.md) and
// validates documents against them.
package schemas

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema documents.
var (
	//go:embed request.schema.json
	RequestJSON []byte
	//go:embed result.schema.json
	ResultJSON []byte
)

var (
	once            sync.Once
	request, result *jsonschema.Schema
	compileErr      error
)

func compile() {
	c := jsonschema.NewCompiler()
	for name, doc := range map[string][]byte{"request.schema.json": RequestJSON, "result.schema.json": ResultJSON} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			compileErr = fmt.Errorf("%s: %w", name, err)
			return
		}
		if err := c.AddResource(name, v); err != nil {
			compileErr = err
			return
		}
	}
	if request, compileErr = c.Compile("request.schema.json"); compileErr != nil {
		return
	}
	result, compileErr = c.Compile("result.schema.json")
}

// ValidateRequest checks a raw JSON document against the request schema.
func ValidateRequest(doc []byte) error {
	return validate(doc, func() *jsonschema.Schema { return request })
}

// ValidateResult checks a raw JSON document against the result schema.
func ValidateResult(doc []byte) error {
	return validate(doc, func() *jsonschema.Schema { return result })
}

func validate(doc []byte, schema func() *jsonschema.Schema) error {
	once.Do(compile)
	if compileErr != nil {
		return compileErr
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := schema().Validate(v); err != nil {
		return errors.New(describe(err))
	}
	return nil
}

// describe turns a schema validation error into one line per violated
// rule, each "at <JSON pointer>: <what>" (the library's first line names
// its internal schema URL, which tells a caller nothing).
func describe(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "- at '"); ok {
			ptr, what, _ := strings.Cut(rest, "': ")
			if ptr == "" {
				ptr = "/"
			}
			out = append(out, ptr+": "+what)
		}
	}
	if len(out) == 0 {
		return err.Error()
	}
	return strings.Join(out, "; ")
}

// Raw returns a schema as a generic JSON value (for OpenAPI and MCP).
func Raw(doc []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(doc, &m)
	return m
}
