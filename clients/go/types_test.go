// Owns checking types.go against the server's OpenAPI document: the committed file must be what
// internal/gentypes writes from the document now, and the error codes must be the document's.

package redial

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/redial-dev/redial/clients/go/internal/gentypes"
)

func readDocument(t *testing.T) []byte {
	t.Helper()
	document, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(gentypes.DocumentPath)))
	if err != nil {
		t.Fatal(err)
	}
	return document
}

func TestTypesAreGeneratedFromTheDocument(t *testing.T) {
	want, err := gentypes.Generate(readDocument(t))
	if err != nil {
		t.Fatalf("the generator fails on %s: %v", gentypes.DocumentPath, err)
	}
	got, err := os.ReadFile("types.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("types.go is stale against %s (or was edited by hand): regenerate it with `cd clients/go && %s` and commit the result; %s",
			gentypes.DocumentPath, gentypes.Command, firstDifference(string(got), string(want)))
	}
}

// firstDifference says where two texts first differ, line by line.
func firstDifference(committed, generated string) string {
	a, b := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("first difference at line %d:\n- committed: %q\n+ generated: %q", i+1, x, y)
		}
	}
	return "they differ"
}

// The document's error codes, read without the generator: the client's ErrorCode constants are
// every one of them, in the same order (the server checks the document against its ErrorCode).
func TestTheErrorCodesAreTheDocuments(t *testing.T) {
	var document struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []ErrorCode `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(readDocument(t), &document); err != nil {
		t.Fatal(err)
	}
	listed := document.Components.Schemas.Error.Properties.Error.Properties.Code.Enum
	if len(listed) < 50 || !reflect.DeepEqual(listed, ErrorCodeValues) {
		t.Fatalf("ErrorCodeValues differs from the document's Error code enum:\n%v\n%v", ErrorCodeValues, listed)
	}
	for _, client := range []ErrorCode{ErrorCodeHTTPError, ErrorCodeInvalidResponse} {
		for _, code := range listed {
			if code == client {
				t.Errorf("the client's own code %s is now one of the API's: give the client's another", code)
			}
		}
	}
}
