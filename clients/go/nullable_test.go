// Owns Nullable's three states on the wire: absent, null, a value; both ways.

package redial

import (
	"encoding/json"
	"testing"
)

func TestNullableTellsAbsentNullAndAValueApart(t *testing.T) {
	for _, c := range []struct {
		patch ReplayPatch
		want  string
	}{
		{ReplayPatch{}, `{}`},
		{ReplayPatch{Credentials: Null[string]()}, `{"credentials":null}`},
		{ReplayPatch{Credentials: NotNull("stripe")}, `{"credentials":"stripe"}`},
		{ReplayPatch{Credentials: NotNull("")}, `{"credentials":""}`},
		{ReplayPatch{Body: NoBody}, `{"body":null}`},
	} {
		got, err := json.Marshal(c.patch)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %s %v; want %s", c.patch, got, err, c.want)
		}
	}
	var group DeadGroup
	if err := json.Unmarshal([]byte(`{"reason": "400 bad request"}`), &group); err != nil || group.Reason == nil ||
		group.Reason.Null || group.Reason.Value != "400 bad request" {
		t.Fatalf("%+v %v", group.Reason, err)
	}
	// encoding/json reads a null into a nil pointer: as absence.
	if err := json.Unmarshal([]byte(`{"reason": null}`), &group); err != nil || group.Reason != nil {
		t.Fatalf("%+v %v", group.Reason, err)
	}
	var direct Nullable[int]
	if err := json.Unmarshal([]byte(`null`), &direct); err != nil || !direct.Null {
		t.Fatalf("%+v %v", direct, err)
	}
	if err := json.Unmarshal([]byte(`7`), &direct); err != nil || direct.Null || direct.Value != 7 {
		t.Fatalf("%+v %v", direct, err)
	}
}
