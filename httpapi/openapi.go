package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3 document of the routes in table(); a test
// checks that the two agree.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(OpenAPI)
}
