package sandgate_test

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func rssKB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// Every sg_error and sg_bytes (fetch answers included) is freed: 20k rounds of failing and succeeding calls
// leave the resident size about where it was.
func TestNoLeaks(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow; the race detector's shadow memory skews RSS")
	}
	dir := tmp(t)
	write(t, dir+"/a.txt", strings.Repeat("x", 1000))
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, _ := sandgate.OpenRoot(dir)
	defer r.Close()
	p, err := sandgate.ParsePolicy([]byte("[net]\nallow = [\"api.example.com\"]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f, err := sandgate.NewFetcher(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	round := func(n int) {
		for i := 0; i < n; i++ {
			sb.Read("missing/" + strconv.Itoa(i))
			sb.Read("a.txt")
			r.Readlink("a.txt")
			sb.List(".")
			f.Fetch(ctx, "https://evil.example/"+strconv.Itoa(i), sandgate.FetchOptions{})     // E_NET_DENIED with hops
			f.Fetch(ctx, "https://api.example.com/", sandgate.FetchOptions{Method: "CONNECT"}) // E_REQUEST
		}
		debug.FreeOSMemory()
	}
	round(10000) // warm up allocators
	before := rssKB(t)
	round(20000)
	after := rssKB(t)
	t.Logf("RSS %d kB -> %d kB", before, after)
	if after-before > 4000 {
		t.Errorf("RSS grew by %d kB over 20k rounds", after-before)
	}
}
