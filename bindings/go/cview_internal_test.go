package sandgate

import (
	"syscall"
	"testing"
	"unsafe"
)

// Library-owned bytes are copied with their whole size_t length: C.GoBytes
// takes a C int, so a result of 4 GiB + 4 KiB came back as its first 4 KiB
// and one of 2 GiB + 4 KiB panicked. The buffer is an anonymous mapping
// reserved without backing (only the touched pages are ever resident), so
// lengths past 2**31 and 2**32 are real, readable C memory.
func TestCViewLengthPast32Bits(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		t.Skip("needs a 64-bit address space")
	}
	for _, n := range []uint64{1<<31 + 4096, 1<<32 + 4096} {
		mem, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err != nil {
			t.Skipf("cannot reserve %d bytes: %v", n, err)
		}
		mem[0], mem[n-1] = 'a', 'z'
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("length %d: panic: %v", n, r)
				}
			}()
			v := cView(unsafe.Pointer(&mem[0]), n)
			if uint64(len(v)) != n {
				t.Errorf("length %d: got a view of %d bytes", n, len(v))
				return
			}
			if v[0] != 'a' || v[n-1] != 'z' {
				t.Errorf("length %d: first/last bytes %q %q", n, v[0], v[n-1])
			}
		}()
		if err := syscall.Munmap(mem); err != nil {
			t.Fatal(err)
		}
	}
}
