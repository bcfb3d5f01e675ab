// Owns the generator's mapping rules, on small documents of their own (the real document is
// checked by the client's TestTypesAreGeneratedFromTheDocument): one check per rule, and the
// refusals.

package gentypes

import (
	"strings"
	"testing"
)

// document is a minimal OpenAPI document with these schemas and paths.
func document(schemas, paths string) []byte {
	if paths == "" {
		paths = "{}"
	}
	return []byte(`{"info": {"version": "9"}, "components": {"schemas": {` + schemas + `}}, "paths": ` + paths + `}`)
}

// withNames runs f with the generator's names and queries replaced (the real ones name shapes of
// the real document).
func withNames(t *testing.T, n map[string]string, q []query) {
	oldNames, oldQueries := names, queries
	names, queries = n, q
	t.Cleanup(func() { names, queries = oldNames, oldQueries })
}

func generate(t *testing.T, schemas, paths string) string {
	t.Helper()
	out, err := Generate(document(schemas, paths))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// squeeze drops the alignment gofmt adds, so that a check reads one field as it is written.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func TestTheMappingRules(t *testing.T) {
	withNames(t, map[string]string{"Thing.state": "State"}, nil)
	text := squeeze(generate(t, `
		"Thing": {"type": "object", "description": "A thing.", "required": ["id", "state", "child", "note", "at", "n"],
		  "properties": {
			"id": {"type": "string", "description": "Its id."},
			"state": {"type": "string", "enum": ["on", "off", "half_on"]},
			"note": {"type": ["string", "null"]},
			"at": {"type": ["string", "null"], "format": "date-time"},
			"n": {"type": "integer"},
			"maybe": {"type": "integer"},
			"label": {"type": "string"},
			"profile": {"type": ["string", "null"]},
			"child": {"oneOf": [{"$ref": "#/components/schemas/Child"}, {"type": "null"}]},
			"counts": {"type": "object", "additionalProperties": {"type": "integer"}},
			"free": {"type": "object"},
			"pairs": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}]}},
			"pair": {"type": "object", "properties": {"url_prefix": {"type": "string"}}},
			"body": {"description": "Anything."},
			"done": {"type": "boolean", "const": true},
			"rule": {"oneOf": [
			  {"type": "object", "required": ["cron"], "properties": {"cron": {"type": "string"}}},
			  {"type": "object", "required": ["every"], "properties": {"every": {"type": "string"}}}]},
			"headers": {"oneOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "array", "items": {"type": "string"}}]}
		  }},
		"Child": {"type": "object", "properties": {"states": {"type": "array", "items": {"type": "string", "enum": ["on", "off", "half_on"]}}}}`, ""))
	for _, want := range []string{
		"// Thing is components/schemas/Thing. // // A thing. type Thing struct {",
		"// Its id. ID string `json:\"id\"`",
		"State State `json:\"state\"`",
		"Note *string `json:\"note\"`",                           // required, nullable: a pointer
		"At *time.Time `json:\"at\"`",                            // date-time
		"N int `json:\"n\"`",                                     // required integer: a value
		"Maybe *int `json:\"maybe,omitempty\"`",                  // optional integer: a pointer
		"Label string `json:\"label,omitempty\"`",                // optional string: "" is absent
		"Profile *Nullable[string] `json:\"profile,omitempty\"`", // optional and nullable: absent, null or a value
		"Child *Child `json:\"child\"`",                          // a oneOf of one schema and null
		"Counts map[string]int `json:\"counts,omitempty\"`",
		"Free map[string]any `json:\"free,omitempty\"`",
		"Pairs [][]string `json:\"pairs,omitempty\"`", // prefixItems of one type
		"Pair *ThingPair `json:\"pair,omitempty\"`",   // an inline object, named by its place
		"type ThingPair struct { URLPrefix string `json:\"url_prefix,omitempty\"` }",
		"// Anything. Body any `json:\"body,omitempty\"`",
		"Done *bool `json:\"done,omitempty\"`",
		"Rule *ThingRule `json:\"rule,omitempty\"`", // a oneOf of objects: one struct of their fields
		"type ThingRule struct { Cron string `json:\"cron,omitempty\"` Every string `json:\"every,omitempty\"` }",
		"type ThingHeaders any", // a oneOf of anything else: an interface
		"it holds one of map[string]string; or []string.",
		"type State string // The values of State. const ( StateOn State = \"on\" StateOff State = \"off\" StateHalfOn State = \"half_on\" )",
		"var StateValues = []State{ StateOn, StateOff, StateHalfOn, }",
		"States []State `json:\"states,omitempty\"`", // the same enum is the same type
		`const APIVersion = "9"`,
	} {
		if !strings.Contains(text, squeeze(want)) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	// Each shape once, the parent before the shapes of its fields.
	if strings.Count(text, "type State string") != 1 || strings.Index(text, "type Thing struct") > strings.Index(text, "type ThingPair struct") {
		t.Errorf("shapes out of order or repeated:\n%s", text)
	}
}

func TestQueryStructs(t *testing.T) {
	withNames(t, map[string]string{"Event.type": "EventKind"}, []query{{
		name: "ListFilter", operation: "list", leave: []string{"cursor"},
		lists: map[string]string{"kind": "EventKind"}, doc: "Which.",
	}})
	text := squeeze(generate(t,
		`"Event": {"type": "object", "properties": {"type": {"type": "string", "enum": ["a.b"]}}}`,
		`{"/v1/list": {"get": {"operationId": "list", "parameters": [
			{"name": "queue", "in": "query", "schema": {"type": "string"}, "description": "A queue."},
			{"name": "kind", "in": "query", "schema": {"type": "string"}},
			{"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}},
			{"name": "limit", "in": "query", "schema": {"type": "integer"}},
			{"name": "blocked", "in": "query", "schema": {"type": "boolean"}},
			{"name": "cursor", "in": "query", "schema": {"type": "string"}},
			{"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}}]}}}`))
	for _, want := range []string{
		"// ListFilter is the query of list (GET /v1/list), less cursor. // // Which. type ListFilter struct {",
		"// A queue. Queue string Kind []EventKind Since *time.Time Limit *int Blocked *bool }",
		`if f.Queue != "" { q.Set("queue", f.Queue) }`,
		`parts[i] = string(v) } q.Set("kind", strings.Join(parts, ","))`,
		`q.Set("since", f.Since.Format(time.RFC3339Nano))`,
		`q.Set("limit", strconv.Itoa(*f.Limit))`,
		`q.Set("blocked", strconv.FormatBool(*f.Blocked))`,
	} {
		if !strings.Contains(text, squeeze(want)) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Cursor") || strings.Contains(text, "LastEventID") {
		t.Errorf("a parameter left out, or a header, is in the struct:\n%s", text)
	}
}

func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name, schemas string
		names         map[string]string
		queries       []query
		err           string
	}{
		{"an unknown keyword", `"A": {"type": "object", "properties": {"x": {"type": "string", "not": {}}}}`, nil, nil,
			"A.x: the generator does not know the keyword(s) not"},
		{"a schema that is no object", `"A": {"type": "string"}`, nil, nil,
			"components/schemas/A is not an object with properties"},
		{"a $ref elsewhere", `"A": {"type": "object", "properties": {"x": {"$ref": "#/definitions/B"}}}`, nil, nil,
			"a $ref outside components/schemas"},
		{"two shapes, one name", `"A": {"type": "object", "properties": {"x": {"type": "string", "enum": ["a"]}, "y": {"type": "string", "enum": ["b"]}}}`,
			map[string]string{"A.x": "Same", "A.y": "Same"}, nil, "two shapes would be named Same"},
		{"one shape, two names", `"A": {"type": "object", "properties": {"x": {"type": "string", "enum": ["a"]}, "y": {"type": "string", "enum": ["a"]}}}`,
			map[string]string{"A.x": "One", "A.y": "Other"}, nil, "names calls the shape at A.y Other, but it is One already"},
		{"a name for nothing", `"A": {"type": "object", "properties": {}}`, map[string]string{"A.gone": "Gone"}, nil,
			"names entries that name nothing in the document: A.gone"},
		{"a query of no operation", `"A": {"type": "object", "properties": {}}`, nil, []query{{name: "Q", operation: "nothing"}},
			"queries' Q: no operation nothing in the document"},
		{"a required property it lacks", `"A": {"type": "object", "required": ["x"], "properties": {}}`, nil, nil,
			"A: required properties it does not have: x"},
		{"two properties, one Go name", `"A": {"type": "object", "properties": {"url": {"type": "string"}, "URL": {"type": "string"}}}`, nil, nil,
			"properties url and URL are both URL in Go"},
		{"several types", `"A": {"type": "object", "properties": {"x": {"type": ["string", "integer"]}}}`, nil, nil,
			"A.x: several types (string, integer)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			withNames(t, c.names, c.queries)
			_, err := Generate(document(c.schemas, ""))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want an error with %q", err, c.err)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, c := range [][2]string{
		{"job_id", "JobID"}, {"url_prefix", "URLPrefix"}, {"p50_ms", "P50Ms"}, {"job.dead", "JobDead"},
		{"half_open", "HalfOpen"}, {"oauth2_client_credentials", "OAuth2ClientCredentials"}, {"from", "From"},
	} {
		if got := pascal(c[0]); got != c[1] {
			t.Errorf("pascal(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	for _, c := range [][2]string{
		{"Schedule.job.request", "ScheduleJobRequest"}, {"Stats.queues[]", "StatsQueues"},
		{"Schedule.rule|1.cron", "ScheduleRule1Cron"}, {"A.b{}", "AB"},
	} {
		if got := derivedName(c[0]); got != c[1] {
			t.Errorf("derivedName(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
