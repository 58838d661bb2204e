package sandgate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// BenchmarkStat compares a confined stat of a small file with os.Stat:
//
//	go test -bench Stat -run '^$'
func BenchmarkStat(b *testing.B) {
	dir := tmp(b)
	write(b, filepath.Join(dir, "d/small.txt"), "hello\n")
	full := filepath.Join(dir, "d/small.txt")
	b.Run("os.Stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Stat(full); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.Root.Stat", func(b *testing.B) {
		r, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		for b.Loop() {
			if _, err := r.Stat("d/small.txt"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, res := range []struct {
		name string
		r    sandgate.Resolver
	}{{"auto", sandgate.ResolverAuto}, {"openat2", sandgate.ResolverOpenat2}, {"walk", sandgate.ResolverWalk}} {
		b.Run("sandgate.Root.Stat/"+res.name, func(b *testing.B) {
			r, err := sandgate.OpenRootWithResolver(dir, res.r)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Stat("d/small.txt"); err != nil {
				b.Skip(err)
			}
			for b.Loop() {
				if _, err := r.Stat("d/small.txt"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("sandgate.Sandbox.Stat", func(b *testing.B) {
		sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close()
		for b.Loop() {
			if _, err := sb.Stat("d/small.txt"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
