// Owns Nullable, the type of the few optional fields whose null means something of its own, which
// Go's encoding/json cannot tell apart from absence with a pointer alone (omitempty leaves out a
// nil pointer, and there is no null to send then).

package redial

import (
	"bytes"
	"encoding/json"
)

// Nullable is an optional field that tells apart absent (a nil *Nullable), null (Null) and a
// value. ReplayPatch.Credentials is one: absent keeps the job's credentials profile, null sends
// with the endpoint's own, a value names another profile. Read from an answer, a null reads as a
// nil *Nullable, as absence does.
type Nullable[T any] struct {
	Value T
	Null  bool
}

// Null is a field sent as null.
func Null[T any]() *Nullable[T] { return &Nullable[T]{Null: true} }

// NotNull is a field sent as v.
func NotNull[T any](v T) *Nullable[T] { return &Nullable[T]{Value: v} }

// MarshalJSON writes null, or the value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.Null {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// UnmarshalJSON reads null, or a value.
func (n *Nullable[T]) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*n = Nullable[T]{Null: true}
		return nil
	}
	n.Null = false
	return json.Unmarshal(data, &n.Value)
}
