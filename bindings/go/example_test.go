package sandgate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func ExampleOpenRoot() {
	dir, _ := os.MkdirTemp("", "sandgate-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)

	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	b, _ := r.ReadFile("sub/../hello.txt")
	fmt.Printf("%q\n", b)
	_, err = r.Open("../etc/passwd")
	fmt.Println(errors.Is(err, sandgate.ErrPathEscape))
	_, err = r.Stat("missing")
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// "hello\n"
	// true
	// true
}

func ExampleNewSandbox() {
	dir, _ := os.MkdirTemp("", "sandgate-example")
	defer os.RemoveAll(dir)

	sb, err := sandgate.NewSandbox(
		sandgate.WithReadRoots(dir),
		sandgate.WithWriteRoot(dir),
		sandgate.WithDenyWrite(".github/**"),
		sandgate.WithAudit(func(e sandgate.AuditEvent) { fmt.Println("audit:", e.Op, e.Path, e.Outcome) }),
	)
	if err != nil {
		panic(err)
	}
	defer sb.Close()
	n, _ := sb.Write("notes/a.md", []byte("# A\n"), false)
	fmt.Println("wrote", n)
	_, err = sb.Write(".github/workflows/ci.yml", []byte("x"), false)
	var se *sandgate.Error
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.Pattern)
	}
	// Output:
	// audit: write notes/a.md OK
	// wrote 4
	// audit: write .github/workflows/ci.yml E_FS_PROTECTED
	// E_FS_PROTECTED .github/**
}

func ExampleFetcher() {
	p, err := sandgate.ParsePolicy([]byte("[net]\nallow = [\"api.example.com\"]\n"), os.TempDir())
	if err != nil {
		panic(err)
	}
	defer p.Close()
	f, err := sandgate.NewFetcher(p)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	_, err = f.Fetch(context.Background(), "https://169.254.169.254/latest/meta-data/", sandgate.FetchOptions{})
	var fe *sandgate.FetchError
	fmt.Println(errors.As(err, &fe), errors.Is(err, sandgate.ErrNetDenied), errors.Is(err, fs.ErrPermission))
	// Output:
	// true true true
}
