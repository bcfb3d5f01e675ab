// The command that writes types.go from the server's OpenAPI document (internal/gentypes says
// how), run from clients/go: `go run ./internal/cmd/gentypes` rewrites types.go, and with -check
// it only compares, exiting 1 when types.go is stale.

package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/redial-dev/redial/clients/go/internal/gentypes"
)

func main() {
	check := flag.Bool("check", false, "only compare: exit 1 when types.go is stale")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintf(os.Stderr, "gentypes: %v\n", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run it from clients/go: %s", gentypes.Command)
	}
	document, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(gentypes.DocumentPath)))
	if err != nil {
		return err
	}
	want, err := gentypes.Generate(document)
	if err != nil {
		return err
	}
	got, err := os.ReadFile("types.go")
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if bytes.Equal(got, want) {
		return nil
	}
	if check {
		return fmt.Errorf("types.go is stale against %s: run `%s`", gentypes.DocumentPath, gentypes.Command)
	}
	if err := os.WriteFile("types.go", want, 0o644); err != nil {
		return err
	}
	fmt.Println("gentypes: wrote types.go")
	return nil
}
