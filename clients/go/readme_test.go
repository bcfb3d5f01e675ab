// Owns running the README as written: its Go blocks are built (go vet) as programs of a module
// that requires this one, and its two-minute start is run against a `redial serve` started with
// the README's configuration and flags, printing what the README says it prints.

package redial

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fence is one fenced block of the README.
type fence struct {
	lang, text string
}

func readmeBlocks(t *testing.T) []fence {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []fence
	var current *fence
	for _, line := range strings.SplitAfter(string(readme), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case current == nil && strings.HasPrefix(trimmed, "```"):
			current = &fence{lang: strings.TrimPrefix(trimmed, "```")}
		case current != nil && trimmed == "```":
			blocks = append(blocks, *current)
			current = nil
		case current != nil:
			current.text += line
		}
	}
	if current != nil {
		t.Fatal("the README has a block that is not closed")
	}
	return blocks
}

func goCommand(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func TestTheReadmeRunsAsWritten(t *testing.T) {
	blocks := readmeBlocks(t)
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// A module of the README's programs, each in a folder of its own, with this one replaced by
	// this folder: nothing is downloaded.
	dir := t.TempDir()
	gomod := "module readme\n\ngo 1.19\n\nrequire github.com/redial-dev/redial/clients/go v0.0.0\n\n" +
		"replace github.com/redial-dev/redial/clients/go => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	var programs []int
	var config, serve, output string
	for i, b := range blocks {
		switch {
		case b.lang == "go":
			programs = append(programs, i)
			folder := filepath.Join(dir, fmt.Sprintf("block%d", i))
			if err := os.MkdirAll(folder, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(folder, "main.go"), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
		case b.lang == "toml" && config == "":
			config = b.text
		case b.lang == "sh" && serve == "" && strings.Contains(b.text, " serve "):
			serve = b.text
		case b.lang == "text" && output == "" && len(programs) == 1:
			output = b.text
		}
	}
	if len(programs) < 2 || config == "" || serve == "" || output == "" {
		t.Fatalf("the README lacks its two-minute start: %d Go blocks, config %q, serve %q, output %q", len(programs), config, serve, output)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "CGO_ENABLED=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
	defer cancel()
	vet := exec.CommandContext(ctx, goCommand(t), "vet", "./...")
	vet.Dir, vet.Env = dir, env
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go blocks do not build (go vet): %v\n%s", err, out)
	}

	// The server as the README starts it: its flags after `serve`.
	words := strings.Fields(serve[strings.Index(serve, " serve ")+len(" serve "):])
	if end := indexOf(words, "#"); end >= 0 {
		words = words[:end]
	}
	s, err := startServer(config, words)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	run := exec.CommandContext(ctx, goCommand(t), "run", fmt.Sprintf("./block%d", programs[0]))
	run.Dir = dir
	run.Env = append(env, "REDIAL_SERVER="+s.url, "REDIAL_TOKEN=")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("the two-minute start failed: %v\n%s%s\nserver log:\n%s", err, stdout.String(), stderr.String(), s.logs())
	}
	if stdout.String() != output {
		t.Fatalf("the two-minute start printed\n%s\nand the README says\n%s", stdout.String(), output)
	}
}

func indexOf(words []string, word string) int {
	for i, w := range words {
		if w == word {
			return i
		}
	}
	return -1
}
