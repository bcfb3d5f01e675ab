// Package gentypes writes the Go client's types.go from the server's OpenAPI document,
// crates/redial-server/src/openapi.json, as clients/python/generate_types.py writes the Python
// client's types.py and crates/redial-api/tests/types.rs the Rust client's types.rs. The document
// is the contract; types.go is never edited by hand. From clients/go:
//
//	go run ./internal/cmd/gentypes           # rewrites types.go
//	go run ./internal/cmd/gentypes -check    # exit 1 when types.go is stale
//
// The client's TestTypesAreGeneratedFromTheDocument fails while types.go differs from what
// Generate writes.
//
// What it writes, from components/schemas (in the document's order) and the operations' query
// parameters that queries names:
//
//   - a struct per object schema, named as the schema, its fields in the document's order, named
//     in Go's way (job_id: JobID), with the JSON name in the tag;
//   - an object written inline (a property's, an array's items) becomes a struct of its own too,
//     named by names (keyed by where it first appears: "Stats.queues[]") or else by its place
//     ("Schedule.job.request": ScheduleJobRequest); identical inline shapes share one;
//   - an enum of strings becomes a string type with a constant per value and a Values list; every
//     enum with the same values (in the same order) is that one type;
//   - string is string, a date-time string time.Time, integer int, number float64, boolean bool,
//     array a slice, an object without properties a map (map[string]any without
//     additionalProperties), a schema with no type any, $ref the schema's struct;
//   - a oneOf of one schema and null is that schema, nullable; of several objects, one struct with
//     all their fields, each optional (exactly one is set); of anything else, a named interface
//     type whose doc says what it may hold (the request headers: a map or [name, value] pairs);
//   - required and not nullable: the type itself. Required and nullable: a pointer (nil is null).
//     Not required and not nullable: a pointer for a number, boolean, time or struct (nil is
//     absent), a string or enum as it is ("" is absent: never a value the API takes or gives).
//     Not required and nullable: a *Nullable[T] (nil is absent; Null sends null), for the few
//     fields whose null means something of its own. Slices, maps and interfaces stay as they are
//     (nil is null or absent). A field that is not required has omitempty;
//   - a query struct per entry of queries, every parameter optional, with a query() method that
//     writes the parameters set (a list parameter joined with commas).
//
// It fails rather than writes something dubious: on a keyword of JSON Schema it does not know,
// two shapes given one name (or one shape two), and an entry of names or queries that names
// nothing in the document. Standard library only.
package gentypes

import (
	"bytes"
	"fmt"
	"go/format"
	"regexp"
	"sort"
	"strings"
)

// Command rewrites types.go, run from clients/go.
const Command = "go run ./internal/cmd/gentypes"

// DocumentPath is the document's path from the repository's root.
const DocumentPath = "crates/redial-server/src/openapi.json"

// names names the shapes the document writes inline, by where they first appear: a schema's name,
// then a property (.name), an array's items ([]), a map's values ({}), a oneOf or anyOf branch
// (|1, |2, ... counted from 1). The same names as the Python client's, where it has them.
var names = map[string]string{
	"Error.error":                "ErrorDetail",
	"Error.error.code":           "ErrorCode",
	"JobInput.request":           "RequestInput",
	"JobInput.request.headers":   "Headers",
	"Job.state":                  "JobState",
	"Job.category":               "DeadCategory",
	"Affected.state":             "OperationState",
	"DeadLetterFilter.key":       "ReplayKey",
	"Stats.queues[]":             "QueueStateCount",
	"Stats.endpoints[]":          "EndpointStateCount",
	"Endpoint.breaker":           "BreakerState",
	"Endpoint.breaker_history[]": "BreakerChange",
	"Queue.groups":               "QueueGroupLimits",
	"Queue.ordering_on_dead":     "OrderingOnDead",
	"SeriesMinute.attempts":      "AttemptsByCategory",
	"ScheduleInput.missed":       "MissedPolicy",
	"Schedule.rule":              "ScheduleRule",
	"Schedule.rule|1.cron":       "ScheduleCron",
	"Schedule.rule|2.every":      "ScheduleEvery",
	"Schedule.missed":            "ScheduleMissed",
	"Schedule.job":               "ScheduleJob",
	"Schedule.job.request":       "ScheduleRequest",
	"QueueGroups.groups[]":       "QueueGroup",
	"CallbackInput.on[]":         "CallbackOn",
	"Event.type":                 "EventKind",
	"ReplayPatch.url_prefix":     "URLPrefix",
	"ReplayPatch.headers":        "HeaderChanges",
	"Forecast.first_at_risk|2":   "FirstAtRisk",
	"Operation.kind":             "OperationKind",
	"Schedule.source":            "ScheduleSource",
	"EndpointCredentials.kind":   "CredentialsKind",
	"Health.status":              "HealthStatus",
	"Ready.status":               "ReadyStatus",
	"NotReady.status":            "NotReadyStatus",
}

// query is a struct of an operation's query parameters, which components/schemas does not have.
type query struct {
	name      string
	operation string
	leave     []string          // parameters the client sets itself
	lists     map[string]string // parameter -> Go type of an item: a comma-separated list
	doc       string
}

var queries = []query{
	{name: "JobFilter", operation: "listJobs", leave: []string{"cursor"},
		doc: "Which jobs ListJobs lists (the cursor is the iterator's)."},
	{name: "DeadGroupsFilter", operation: "deadLetterGroups",
		doc: "Which dead letters DeadLetterGroups groups."},
	{name: "DeadPatternsFilter", operation: "deadLetterPatterns",
		doc: "Which dead letters DeadLetterPatterns groups by the pattern of their reason."},
	{name: "OrderingKeysFilter", operation: "queueOrderingKeys",
		doc: "Which page of a queue's ordering keys OrderingKeys reads."},
	{name: "EventFilter", operation: "listEvents",
		lists: map[string]string{"queue": "string", "kind": "EventKind"},
		doc:   "Which page of the event log Events reads."},
	{name: "EventStreamFilter", operation: "streamEvents",
		lists: map[string]string{"queue": "string", "kind": "EventKind"},
		doc:   "Where StreamEvents starts and which events it gives."},
}

// Keywords that only constrain values or document them: no part of a Go type.
var ignored = words("description default example format pattern minLength maxLength minimum " +
	"maximum minItems maxItems maxProperties propertyNames required")

// Keywords that make the type.
var typed = words("$ref type enum const oneOf anyOf properties additionalProperties items prefixItems")

func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(s) {
		out[w] = true
	}
	return out
}

// kind says how a type stands for null and absence.
type kind int

const (
	kindText    kind = iota // string and string enums: "" is absent
	kindValue               // int, float64, bool, time.Time: a pointer where nil must be told apart
	kindStruct              // a struct: likewise
	kindNilable             // slices, maps, interfaces: nil is null and absent
)

type goType struct {
	expr string
	kind kind
}

var anyType = goType{"any", kindNilable}

type field struct {
	name, json, typ, doc string
	optional             bool
}

// param is a query field and how query() writes it.
type param struct {
	field, name string
	typ         goType
	list        string // the item type, for a list
}

// decl is one declaration of types.go.
type decl struct {
	what         byte // 's' struct, 'e' enum, 'i' interface, 'q' query struct
	name, origin string
	doc          string
	fields       []field
	values       []string // an enum's
	alternatives []string // an interface's
	params       []param  // a query struct's
}

type generator struct {
	root, schemas *node
	decls         []*decl
	byKey         map[string]*decl
	byName        map[string]string // a type's name -> where it was first given
	usedNames     map[string]bool
	imports       map[string]bool
}

// Generate is types.go's text, formatted, from the document's.
func Generate(document []byte) ([]byte, error) {
	root, err := parseDocument(document)
	if err != nil {
		return nil, err
	}
	schemas := root.get("components").get("schemas")
	if schemas == nil || schemas.kind != 'o' {
		return nil, fmt.Errorf("the document has no components/schemas")
	}
	g := &generator{
		root: root, schemas: schemas, byKey: map[string]*decl{}, byName: map[string]string{},
		usedNames: map[string]bool{}, imports: map[string]bool{},
	}
	for _, name := range schemas.keys {
		g.byName[name] = "components/schemas/" + name
	}
	for i, name := range schemas.keys {
		s := schemas.vals[i]
		if s.get("type").str() != "object" || s.get("properties") == nil {
			return nil, fmt.Errorf("components/schemas/%s is not an object with properties: teach the generator", name)
		}
		d := &decl{what: 's', name: name, origin: "components/schemas/" + name}
		g.decls = append(g.decls, d)
		if err := g.fillStruct(d, s, name); err != nil {
			return nil, err
		}
	}
	for _, q := range queries {
		if err := g.queryDecl(q); err != nil {
			return nil, err
		}
	}
	var unused []string
	for loc := range names {
		if !g.usedNames[loc] {
			unused = append(unused, loc)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("names entries that name nothing in the document: %s", strings.Join(unused, ", "))
	}
	text, err := g.write(root.get("info").get("version").str())
	if err != nil {
		return nil, err
	}
	formatted, err := format.Source(text)
	if err != nil {
		return nil, fmt.Errorf("the generated code does not parse (%v): fix the generator", err)
	}
	return formatted, nil
}

func (g *generator) checkKeywords(s *node, loc string) error {
	var unknown []string
	for _, k := range s.keys {
		if !ignored[k] && !typed[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%s: the generator does not know the keyword(s) %s: teach it", loc, strings.Join(unknown, ", "))
	}
	return nil
}

// constraintOnly is whether an object's anyOf/oneOf only says which of its properties must be there.
func constraintOnly(s *node) bool {
	var branches []*node
	if b := s.get("anyOf"); b != nil {
		branches = append(branches, b.items...)
	}
	if b := s.get("oneOf"); b != nil {
		branches = append(branches, b.items...)
	}
	for _, b := range branches {
		for i, k := range b.keys {
			switch k {
			case "required":
			case "properties":
				for _, p := range b.vals[i].vals {
					if len(p.keys) != 1 || p.keys[0] != "const" {
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return len(branches) > 0
}

// fillStruct reads an object schema's properties into d's fields; d is declared already, so that
// it comes before the shapes of its fields.
func (g *generator) fillStruct(d *decl, s *node, loc string) error {
	if err := g.checkKeywords(s, loc); err != nil {
		return err
	}
	if (s.get("anyOf") != nil || s.get("oneOf") != nil) && !constraintOnly(s) {
		return fmt.Errorf("%s: an object with properties and a oneOf/anyOf of shapes: teach the generator", loc)
	}
	if ap := s.get("additionalProperties"); ap != nil && ap.kind == 'o' {
		return fmt.Errorf("%s: an object with properties and additionalProperties: teach the generator", loc)
	}
	d.doc = s.get("description").str()
	required := map[string]bool{}
	for _, r := range s.get("required").strings() {
		required[r] = true
	}
	props := s.get("properties")
	seen := map[string]string{}
	for i, prop := range props.keys {
		sub := props.vals[i]
		t, nullable, err := g.resolve(sub, loc+"."+prop)
		if err != nil {
			return err
		}
		f := field{name: pascal(prop), json: prop, doc: sub.get("description").str(), optional: !required[prop]}
		f.typ = declared(t, nullable, f.optional)
		if other, ok := seen[f.name]; ok {
			return fmt.Errorf("%s: properties %s and %s are both %s in Go", loc, other, prop, f.name)
		}
		seen[f.name] = prop
		d.fields = append(d.fields, f)
		delete(required, prop)
	}
	if len(required) > 0 {
		var missing []string
		for r := range required {
			missing = append(missing, r)
		}
		sort.Strings(missing)
		return fmt.Errorf("%s: required properties it does not have: %s", loc, strings.Join(missing, ", "))
	}
	return nil
}

// declared is a field's Go type, from its type and whether it may be null or absent.
func declared(t goType, nullable, optional bool) string {
	if t.kind == kindNilable {
		return t.expr
	}
	switch {
	case nullable && optional:
		return "*Nullable[" + t.expr + "]"
	case nullable, optional && t.kind != kindText:
		return "*" + t.expr
	}
	return t.expr
}

func isNull(s *node) bool {
	return s.kind == 'o' && len(s.keys) == 1 && s.get("type").str() == "null"
}

func objectWithProperties(s *node) bool {
	return s.get("properties") != nil && (s.get("type") == nil || s.get("type").str() == "object")
}

// resolve is the Go type of a schema found at loc, and whether it may be null.
func (g *generator) resolve(s *node, loc string) (goType, bool, error) {
	if s == nil {
		return goType{}, false, fmt.Errorf("%s: no schema", loc)
	}
	if s.kind == 'b' && s.truth {
		return anyType, false, nil
	}
	if s.kind != 'o' {
		return goType{}, false, fmt.Errorf("%s: a schema that is not an object", loc)
	}
	if err := g.checkKeywords(s, loc); err != nil {
		return goType{}, false, err
	}
	if ref := s.get("$ref"); ref != nil {
		name := strings.TrimPrefix(ref.str(), "#/components/schemas/")
		if name == ref.str() || g.schemas.get(name) == nil {
			return goType{}, false, fmt.Errorf("%s: a $ref outside components/schemas: %s", loc, ref.str())
		}
		return goType{name, kindStruct}, false, nil
	}
	branches := s.get("oneOf")
	if branches == nil {
		branches = s.get("anyOf")
	}
	if branches != nil {
		return g.union(s, branches, loc)
	}
	var types []string
	nullable := false
	if t := s.get("type"); t != nil {
		list := []string{t.str()}
		if t.kind == 'a' {
			list = t.strings()
		}
		for _, name := range list {
			if name == "null" {
				nullable = true
			} else {
				types = append(types, name)
			}
		}
	}
	if c := s.get("const"); c != nil {
		switch c.kind {
		case 'b':
			return goType{"bool", kindValue}, nullable, nil
		case 's':
			return goType{"string", kindText}, nullable, nil
		}
		return goType{}, false, fmt.Errorf("%s: a const the generator does not know: teach it", loc)
	}
	if e := s.get("enum"); e != nil {
		var values []string
		for _, v := range e.items {
			switch v.kind {
			case 'z':
				nullable = true
			case 's':
				values = append(values, v.text)
			default:
				return goType{}, false, fmt.Errorf("%s: an enum of values other than strings: teach the generator", loc)
			}
		}
		t, err := g.enumDecl(values, loc)
		return t, nullable, err
	}
	if len(types) == 0 {
		return anyType, nullable, nil
	}
	if len(types) > 1 {
		return goType{}, false, fmt.Errorf("%s: several types (%s): teach the generator", loc, strings.Join(types, ", "))
	}
	switch types[0] {
	case "string":
		if s.get("format").str() == "date-time" {
			g.imports["time"] = true
			return goType{"time.Time", kindValue}, nullable, nil
		}
		return goType{"string", kindText}, nullable, nil
	case "integer":
		return goType{"int", kindValue}, nullable, nil
	case "number":
		return goType{"float64", kindValue}, nullable, nil
	case "boolean":
		return goType{"bool", kindValue}, nullable, nil
	case "array":
		t, err := g.array(s, loc)
		return t, nullable, err
	case "object":
		if s.get("properties") != nil {
			t, err := g.inlineStruct(s, loc)
			return t, nullable, err
		}
		if ap := s.get("additionalProperties"); ap != nil && ap.kind == 'o' {
			item, itemNullable, err := g.resolve(ap, loc+"{}")
			if err != nil {
				return goType{}, false, err
			}
			return goType{"map[string]" + declared(item, itemNullable, false), kindNilable}, nullable, nil
		}
		return goType{"map[string]any", kindNilable}, nullable, nil
	}
	return goType{}, false, fmt.Errorf("%s: a type the generator does not know: %s", loc, types[0])
}

func (g *generator) array(s *node, loc string) (goType, error) {
	if prefix := s.get("prefixItems"); prefix != nil {
		expr := ""
		for i, item := range prefix.items {
			t, nullable, err := g.resolve(item, fmt.Sprintf("%s[%d]", loc, i))
			if err != nil {
				return goType{}, err
			}
			e := declared(t, nullable, false)
			if i > 0 && e != expr {
				return goType{"[]any", kindNilable}, nil
			}
			expr = e
		}
		return goType{"[]" + expr, kindNilable}, nil
	}
	if items := s.get("items"); items != nil {
		t, nullable, err := g.resolve(items, loc+"[]")
		if err != nil {
			return goType{}, err
		}
		return goType{"[]" + declared(t, nullable, false), kindNilable}, nil
	}
	return goType{"[]any", kindNilable}, nil
}

// union is a oneOf's or anyOf's type: one schema (nullable when another branch is null), one
// struct of several objects' fields, or an interface for anything else.
func (g *generator) union(s, branches *node, loc string) (goType, bool, error) {
	nullable := false
	var rest []*node
	var places []string
	for i, b := range branches.items {
		if isNull(b) {
			nullable = true
			continue
		}
		rest = append(rest, b)
		places = append(places, fmt.Sprintf("%s|%d", loc, i+1))
	}
	switch {
	case len(rest) == 0:
		return goType{}, false, fmt.Errorf("%s: a oneOf of null alone", loc)
	case len(rest) == 1:
		t, n, err := g.resolve(rest[0], places[0])
		return t, nullable || n, err
	}
	objects := true
	for _, b := range rest {
		objects = objects && objectWithProperties(b)
	}
	key := "union:" + s.canonical("description", "example", "default")
	if d, ok := g.byKey[key]; ok {
		return goType{d.name, kindOf(d)}, nullable, g.noteName(loc, d.name)
	}
	name, err := g.nameFor(loc, key)
	if err != nil {
		return goType{}, false, err
	}
	if objects {
		d := &decl{what: 's', name: name, origin: loc,
			doc: "One of several shapes (oneOf): the field of the one given is set, the others nil."}
		g.byKey[key] = d
		g.decls = append(g.decls, d)
		seen := map[string]bool{}
		for i, b := range rest {
			props := b.get("properties")
			for j, prop := range props.keys {
				t, n, err := g.resolve(props.vals[j], places[i]+"."+prop)
				if err != nil {
					return goType{}, false, err
				}
				if seen[prop] {
					return goType{}, false, fmt.Errorf("%s: the branches share the property %s: teach the generator", loc, prop)
				}
				seen[prop] = true
				d.fields = append(d.fields, field{name: pascal(prop), json: prop, typ: declared(t, n, true),
					doc: props.vals[j].get("description").str(), optional: true})
			}
		}
		return goType{name, kindStruct}, nullable, nil
	}
	d := &decl{what: 'i', name: name, origin: loc}
	g.byKey[key] = d
	g.decls = append(g.decls, d)
	for i, b := range rest {
		t, n, err := g.resolve(b, places[i])
		if err != nil {
			return goType{}, false, err
		}
		alt := declared(t, n, false)
		if desc := b.get("description").str(); desc != "" {
			alt += " (" + strings.TrimSuffix(desc, ".") + ")"
		}
		d.alternatives = append(d.alternatives, alt)
	}
	return goType{name, kindNilable}, nullable, nil
}

func kindOf(d *decl) kind {
	switch d.what {
	case 'e':
		return kindText
	case 'i':
		return kindNilable
	}
	return kindStruct
}

func (g *generator) inlineStruct(s *node, loc string) (goType, error) {
	key := "struct:" + s.canonical("description", "example", "default")
	if d, ok := g.byKey[key]; ok {
		return goType{d.name, kindStruct}, g.noteName(loc, d.name)
	}
	name, err := g.nameFor(loc, key)
	if err != nil {
		return goType{}, err
	}
	d := &decl{what: 's', name: name, origin: loc}
	g.byKey[key] = d
	g.decls = append(g.decls, d)
	return goType{name, kindStruct}, g.fillStruct(d, s, loc)
}

func (g *generator) enumDecl(values []string, loc string) (goType, error) {
	key := "enum:" + strings.Join(values, "\x00")
	if d, ok := g.byKey[key]; ok {
		return goType{d.name, kindText}, g.noteName(loc, d.name)
	}
	name, err := g.nameFor(loc, key)
	if err != nil {
		return goType{}, err
	}
	d := &decl{what: 'e', name: name, origin: loc, values: values}
	g.byKey[key] = d
	g.decls = append(g.decls, d)
	return goType{name, kindText}, nil
}

// nameFor is the name of a new shape first found at loc.
func (g *generator) nameFor(loc, key string) (string, error) {
	name, given := names[loc]
	if given {
		g.usedNames[loc] = true
	} else {
		name = derivedName(loc)
	}
	if first, taken := g.byName[name]; taken {
		return "", fmt.Errorf("two shapes would be named %s (at %s and %s): give one of them another in names", name, first, loc)
	}
	g.byName[name] = loc
	return name, nil
}

// noteName checks that names gives a shape seen before no other name at loc.
func (g *generator) noteName(loc, existing string) error {
	name, given := names[loc]
	if !given {
		return nil
	}
	g.usedNames[loc] = true
	if name != existing {
		return fmt.Errorf("names calls the shape at %s %s, but it is %s already (where it first appears, at %s): key the entry there",
			loc, name, existing, g.byName[existing])
	}
	return nil
}

var locPart = regexp.MustCompile(`[^.\[\]{}|]+|\|\d+|\[\d+\]`)

// derivedName is a shape's name from its place: "Schedule.job.request" -> ScheduleJobRequest.
func derivedName(loc string) string {
	name := ""
	for _, part := range locPart.FindAllString(loc, -1) {
		if part[0] == '|' || part[0] == '[' {
			name += strings.Trim(part, "|[]")
		} else {
			name += pascal(part)
		}
	}
	return name
}

var initialisms = map[string]string{
	"id": "ID", "url": "URL", "uri": "URI", "http": "HTTP", "json": "JSON", "api": "API",
	"uuid": "UUID", "ip": "IP", "ttl": "TTL", "tls": "TLS", "mtls": "MTLS", "oauth2": "OAuth2",
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// pascal is a JSON name or an enum value as a Go identifier: job_id -> JobID, job.dead -> JobDead.
func pascal(word string) string {
	out := ""
	for _, part := range nonWord.Split(word, -1) {
		if part == "" {
			continue
		}
		if v, ok := initialisms[strings.ToLower(part)]; ok {
			out += v
		} else {
			out += strings.ToUpper(part[:1]) + part[1:]
		}
	}
	return out
}

func (g *generator) queryDecl(q query) error {
	var op *node
	var where string
	paths := g.root.get("paths")
	if paths != nil {
		for i, path := range paths.keys {
			for j, method := range paths.vals[i].keys {
				if o := paths.vals[i].vals[j]; o.get("operationId").str() == q.operation {
					op, where = o, strings.ToUpper(method)+" "+path
				}
			}
		}
	}
	if op == nil {
		return fmt.Errorf("queries' %s: no operation %s in the document", q.name, q.operation)
	}
	d := &decl{what: 'q', name: q.name, origin: fmt.Sprintf("the query of %s (%s)", q.operation, where), doc: q.doc}
	if left := strings.Join(q.leave, ", "); left != "" {
		d.origin += ", less " + left
	}
	if first, taken := g.byName[q.name]; taken {
		return fmt.Errorf("queries' %s is the name of %s already", q.name, first)
	}
	g.byName[q.name] = d.origin
	g.decls = append(g.decls, d)
	leave := map[string]bool{}
	for _, l := range q.leave {
		leave[l] = true
	}
	lists := map[string]bool{}
	var params []*node
	if p := op.get("parameters"); p != nil {
		params = p.items
	}
	for _, p := range params {
		name := p.get("name").str()
		if p.get("in").str() != "query" {
			continue
		}
		if leave[name] {
			delete(leave, name)
			continue
		}
		f := field{name: pascal(name), json: name, doc: p.get("description").str(), optional: true}
		pr := param{field: f.name, name: name}
		if item, ok := q.lists[name]; ok {
			lists[name] = true
			if p.get("schema").get("type").str() != "string" {
				return fmt.Errorf("queries' %s: %s is no string, so no comma-separated list", q.name, name)
			}
			if _, known := g.byName[item]; !known && item != "string" {
				return fmt.Errorf("queries' %s: the list item type %s is none of the document's", q.name, item)
			}
			f.typ, pr.list = "[]"+item, item
			g.imports["strings"] = true
		} else {
			t, nullable, err := g.resolve(p.get("schema"), q.name+"."+name)
			if err != nil {
				return err
			}
			f.typ, pr.typ = declared(t, nullable, true), t
			switch {
			case t.kind == kindText:
			case t.expr == "int", t.expr == "bool":
				g.imports["strconv"] = true
			case t.expr == "time.Time":
			default:
				return fmt.Errorf("queries' %s: %s is a %s, which query() cannot write: teach the generator", q.name, name, t.expr)
			}
		}
		d.fields = append(d.fields, f)
		d.params = append(d.params, pr)
	}
	var missing []string
	for l := range leave {
		missing = append(missing, l)
	}
	for l := range q.lists {
		if !lists[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("queries' %s: %s has no query parameter %s", q.name, q.operation, strings.Join(missing, ", "))
	}
	g.imports["net/url"] = true
	return nil
}

const width = 100

// comment writes text as // lines of at most width columns after indent.
func comment(b *bytes.Buffer, indent, text string) {
	for p, paragraph := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p > 0 {
			b.WriteString(indent + "//\n")
		}
		line := ""
		for _, w := range strings.Fields(paragraph) {
			if line != "" && len(indent)+3+len(line)+1+len(w) > width {
				b.WriteString(indent + "// " + line + "\n")
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		if line != "" {
			b.WriteString(indent + "// " + line + "\n")
		}
	}
}

func (g *generator) write(version string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by " + Command + " from " + DocumentPath + "; DO NOT EDIT.\n\n")
	comment(&b, "", "The API's shapes, generated from the document (components/schemas, and the query "+
		"parameters of a few operations) by internal/gentypes, whose package doc says how each schema "+
		"becomes a Go type. Change the document (or the generator's names and queries), then run `"+
		Command+"` from clients/go; TestTypesAreGeneratedFromTheDocument fails while this file is stale.")
	b.WriteString("\npackage redial\n\n")
	var imports []string
	for imp := range g.imports {
		imports = append(imports, imp)
	}
	sort.Strings(imports)
	if len(imports) > 0 {
		b.WriteString("import (\n")
		for _, imp := range imports {
			fmt.Fprintf(&b, "\t%q\n", imp)
		}
		b.WriteString(")\n\n")
	}
	b.WriteString("// APIVersion is info.version of the document these types come from.\n")
	fmt.Fprintf(&b, "const APIVersion = %q\n", version)

	idents := map[string]string{"APIVersion": "the version"}
	claim := func(ident, what string) error {
		if other, ok := idents[ident]; ok {
			return fmt.Errorf("%s would be both %s and %s: give one of them another name in names", ident, other, what)
		}
		idents[ident] = what
		return nil
	}
	for _, d := range g.decls {
		if err := claim(d.name, d.origin); err != nil {
			return nil, err
		}
		b.WriteString("\n")
		switch d.what {
		case 's', 'q':
			comment(&b, "", d.name+" is "+d.origin+".")
			if d.doc != "" {
				b.WriteString("//\n")
				comment(&b, "", d.doc)
			}
			fmt.Fprintf(&b, "type %s struct {\n", d.name)
			for _, f := range d.fields {
				if f.doc != "" {
					comment(&b, "\t", f.doc)
				}
				if d.what == 'q' {
					fmt.Fprintf(&b, "\t%s %s\n", f.name, f.typ)
					continue
				}
				tag := f.json
				if f.optional {
					tag += ",omitempty"
				}
				fmt.Fprintf(&b, "\t%s %s `json:%q`\n", f.name, f.typ, tag)
			}
			b.WriteString("}\n")
			if d.what == 'q' {
				writeQuery(&b, d)
			}
		case 'e':
			comment(&b, "", d.name+" is the enum at "+d.origin+".")
			fmt.Fprintf(&b, "type %s string\n\n// The values of %s.\nconst (\n", d.name, d.name)
			var consts []string
			for _, v := range d.values {
				c := d.name + pascal(v)
				if err := claim(c, d.name+" "+v); err != nil {
					return nil, err
				}
				consts = append(consts, c)
				fmt.Fprintf(&b, "\t%s %s = %q\n", c, d.name, v)
			}
			b.WriteString(")\n\n")
			if err := claim(d.name+"Values", "the list of "+d.name); err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "// %sValues lists every %s, in the document's order.\n", d.name, d.name)
			fmt.Fprintf(&b, "var %sValues = []%s{\n\t%s,\n}\n", d.name, d.name, strings.Join(consts, ",\n\t"))
		case 'i':
			comment(&b, "", d.name+" is the oneOf at "+d.origin+": it holds one of "+
				strings.Join(d.alternatives, "; or ")+".")
			fmt.Fprintf(&b, "type %s any\n", d.name)
		}
	}
	return b.Bytes(), nil
}

// writeQuery writes a query struct's query() method: each field set, as the API takes it.
func writeQuery(b *bytes.Buffer, d *decl) {
	fmt.Fprintf(b, "\n// query is the parameters set, as the API takes them.\nfunc (f %s) query() url.Values {\n\tq := url.Values{}\n", d.name)
	for _, p := range d.params {
		v := "f." + p.field
		switch {
		case p.list == "string":
			fmt.Fprintf(b, "\tif len(%s) > 0 {\n\t\tq.Set(%q, strings.Join(%s, \",\"))\n\t}\n", v, p.name, v)
		case p.list != "":
			fmt.Fprintf(b, "\tif len(%s) > 0 {\n\t\tparts := make([]string, len(%s))\n\t\tfor i, v := range %s {\n\t\t\tparts[i] = string(v)\n\t\t}\n\t\tq.Set(%q, strings.Join(parts, \",\"))\n\t}\n",
				v, v, v, p.name)
		case p.typ.kind == kindText:
			s := v
			if p.typ.expr != "string" {
				s = "string(" + v + ")"
			}
			fmt.Fprintf(b, "\tif %s != \"\" {\n\t\tq.Set(%q, %s)\n\t}\n", v, p.name, s)
		case p.typ.expr == "int":
			fmt.Fprintf(b, "\tif %s != nil {\n\t\tq.Set(%q, strconv.Itoa(*%s))\n\t}\n", v, p.name, v)
		case p.typ.expr == "bool":
			fmt.Fprintf(b, "\tif %s != nil {\n\t\tq.Set(%q, strconv.FormatBool(*%s))\n\t}\n", v, p.name, v)
		case p.typ.expr == "time.Time":
			fmt.Fprintf(b, "\tif %s != nil {\n\t\tq.Set(%q, %s.Format(time.RFC3339Nano))\n\t}\n", v, p.name, v)
		}
	}
	b.WriteString("\treturn q\n}\n")
}
