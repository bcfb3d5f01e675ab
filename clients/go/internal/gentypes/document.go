// Owns reading the OpenAPI document into a tree that keeps the order its objects' keys are
// written in (encoding/json's maps lose it, and the generated structs list their fields in the
// document's order). Does not own what the tree means: that is gentypes.go.

package gentypes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// node is one JSON value, with an object's keys in the order they are written.
type node struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	keys  []string
	vals  []*node
	items []*node
	text  string // a string's value, or a number as written
	truth bool
}

func parseDocument(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	root, err := parseValue(dec)
	if err != nil {
		return nil, fmt.Errorf("the document is not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("the document has more than one JSON value")
	}
	return root, nil
}

func parseValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{kind: 'o'}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := keyTok.(string)
				if !ok {
					return nil, fmt.Errorf("an object key that is not a string")
				}
				val, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.vals = append(n.vals, val)
			}
			_, err := dec.Token() // the closing brace
			return n, err
		case '[':
			n := &node{kind: 'a'}
			for dec.More() {
				item, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
			}
			_, err := dec.Token() // the closing bracket
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &node{kind: 's', text: t}, nil
	case json.Number:
		return &node{kind: 'n', text: t.String()}, nil
	case bool:
		return &node{kind: 'b', truth: t}, nil
	case nil:
		return &node{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// get is the value of an object's key, or nil when n is no object or lacks the key.
func (n *node) get(key string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// str is a string value, or "" for anything else (a missing value too).
func (n *node) str() string {
	if n == nil || n.kind != 's' {
		return ""
	}
	return n.text
}

// strings is an array's string items; other items are left out.
func (n *node) strings() []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, item := range n.items {
		if item.kind == 's' {
			out = append(out, item.text)
		}
	}
	return out
}

// canonical is a value's identity: JSON with sorted keys, less the keys in drop at the top.
func (n *node) canonical(drop ...string) string {
	var b bytes.Buffer
	n.writeCanonical(&b, drop)
	return b.String()
}

func (n *node) writeCanonical(b *bytes.Buffer, drop []string) {
	switch n.kind {
	case 'o':
		order := make([]int, 0, len(n.keys))
	keys:
		for i, k := range n.keys {
			for _, d := range drop {
				if k == d {
					continue keys
				}
			}
			order = append(order, i)
		}
		sort.Slice(order, func(a, c int) bool { return n.keys[order[a]] < n.keys[order[c]] })
		b.WriteByte('{')
		for j, i := range order {
			if j > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(n.keys[i])
			b.Write(key)
			b.WriteByte(':')
			n.vals[i].writeCanonical(b, nil)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, item := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			item.writeCanonical(b, nil)
		}
		b.WriteByte(']')
	case 's':
		s, _ := json.Marshal(n.text)
		b.Write(s)
	case 'n':
		b.WriteString(n.text)
	case 'b':
		if n.truth {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	default:
		b.WriteString("null")
	}
}
