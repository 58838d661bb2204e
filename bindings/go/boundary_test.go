package sandgate_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// A Go int handed to a 32-bit C parameter keeps its low 32 bits: a port of
// 1<<32 + 443 would be judged as 443, and open flags with a bit past 32 would
// lose it unseen. Such values are refused (E_REQUEST), not truncated.
func TestIntsOutOfACParametersRangeAreRefused(t *testing.T) {
	dir := tmp(t)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	p, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if d, err := p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "example.com", Port: 443}); err != nil || !d.Allowed {
		t.Fatalf("port 443: %+v %v", d, err)
	}
	for _, port := range []int{1<<32 + 443, 1<<31 + 443, 1<<63 - 1, 65536} {
		d, err := p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "example.com", Port: port})
		if !errors.Is(err, sandgate.ErrRequest) || d.Allowed {
			t.Errorf("port %d: %+v %v, want E_REQUEST", port, d, err)
		}
	}

	r, err := sandgate.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, flag := range []int{1<<32 | os.O_WRONLY | os.O_CREATE, -1 << 40} {
		f, err := r.OpenFile("new.txt", flag, 0o644)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, sandgate.ErrRequest) {
			t.Errorf("flags %#x: %v, want E_REQUEST", flag, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new.txt was created: %v", err)
	}
}
