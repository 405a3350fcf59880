package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
)

// schemaFor builds a JSON Schema for the args struct A from its json and
// desc tags: fields without omitempty are required; unknown properties are
// rejected (the decoder does the same).
func schemaFor[A any]() json.RawMessage {
	b, err := json.Marshal(typeSchema(reflect.TypeFor[A]()))
	if err != nil {
		panic(err)
	}
	return b
}

func typeSchema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		required := []string{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			s := typeSchema(f.Type)
			if d := f.Tag.Get("desc"); d != "" {
				s["description"] = d
			}
			props[name] = s
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	}
	panic("gateway: no schema for " + t.String())
}
