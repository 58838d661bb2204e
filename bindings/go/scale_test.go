package sandgate_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents) - 1 // the directory being read
}

// 1,000 sandboxes alive at once, each with its own two roots, used from many goroutines (which the Go
// runtime moves between OS threads at will): every call answers for its own sandbox, the sandboxes hold
// at most two descriptors each, and closing them releases every one.
func TestManySandboxesFromGoroutines(t *testing.T) {
	const alive, workers = 1000, 16
	dir := tmp(t)
	type pair struct{ r, w string }
	dirs := make([]pair, alive)
	for i := range dirs {
		r, w := filepath.Join(dir, fmt.Sprintf("r%d", i)), filepath.Join(dir, fmt.Sprintf("w%d", i))
		if err := os.MkdirAll(filepath.Join(r, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(r, "sub/id.txt"), fmt.Sprintf("sandbox %d\n", i))
		dirs[i] = pair{r, w}
	}
	before := openFDs(t)
	boxes := make([]*sandgate.Sandbox, alive)
	for i, d := range dirs {
		sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(d.r), sandgate.WithWriteRoot(d.w),
			sandgate.WithDenyWrite("*.pem"))
		if err != nil {
			t.Fatal(err)
		}
		boxes[i] = sb
	}
	if held := openFDs(t) - before; held > 2*alive+16 {
		t.Fatalf("%d sandboxes hold %d descriptors", alive, held)
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			name := fmt.Sprintf("g%d.txt", g)
			for k := 0; k < alive; k++ {
				i := (k + g*alive/workers) % alive
				got, err := boxes[i].Read("sub/id.txt")
				if err != nil || string(got) != fmt.Sprintf("sandbox %d\n", i) {
					errs <- fmt.Errorf("sandbox %d answered %q, %v", i, got, err)
					return
				}
				if _, err := boxes[i].Write(name, []byte(name), false); err != nil {
					errs <- err
					return
				}
				if err := boxes[i].Delete(name); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	for _, sb := range boxes {
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if after := openFDs(t); after != before {
		t.Fatalf("descriptors: %d before the sandboxes, %d after closing them", before, after)
	}
	if _, err := boxes[0].Read("sub/id.txt"); !errors.Is(err, sandgate.ErrClosed) {
		t.Fatalf("a closed sandbox answered %v", err)
	}
}
