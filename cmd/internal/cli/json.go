package cli

import (
	"encoding/json"
	"io"
)

// WriteJSON writes v as the commands' JSON: indented as one document, or
// on one line for a stream of objects (NDJSON), without HTML escaping.
func WriteJSON(w io.Writer, v any, document bool) error {
	enc := json.NewEncoder(w)
	if document {
		enc.SetIndent("", "  ")
	}
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
