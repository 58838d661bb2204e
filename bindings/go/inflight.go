package sandgate

import "sync/atomic"

// inflight counts the calls in progress on a handle whose callbacks may
// call back in (Sandbox, Executor), instead of a lock held across the C
// call: Close marks the handle closed and returns, and the handle is freed
// by whichever leaves last, Close or the last call in flight. So an audit
// callback may call Close, or another method, on the handle it reports on
// (it runs inside a call, which holds its count), with no goroutine
// identity needed.
//
// state is the count of calls in flight plus the closed and freed bits.
type inflight struct {
	state atomic.Uint64
}

const (
	inflightClosed uint64 = 1 << 63
	inflightFreed  uint64 = 1 << 62
)

// enter counts a call in. ok is false (nothing counted) once Close was
// called; free is true when the caller must now free the handle (its
// undone count was the last: see leave).
func (c *inflight) enter() (ok, free bool) {
	if c.state.Add(1)&inflightClosed != 0 {
		return false, c.leave()
	}
	return true, false
}

// leave counts a call out; true for the one caller that must now free the
// handle (closed, nothing left in flight, not freed yet). A refused enter
// leaves through here too: its count may be the last one out.
func (c *inflight) leave() bool {
	return c.state.Add(^uint64(0)) == inflightClosed &&
		c.state.CompareAndSwap(inflightClosed, inflightClosed|inflightFreed)
}

// close marks the handle closed and counts Close itself in (it leaves with
// leave); false when it was closed already (nothing counted).
func (c *inflight) close() bool {
	for {
		s := c.state.Load()
		if s&inflightClosed != 0 {
			return false
		}
		if c.state.CompareAndSwap(s, (s+1)|inflightClosed) {
			return true
		}
	}
}

// closed says whether Close was called.
func (c *inflight) closed() bool { return c.state.Load()&inflightClosed != 0 }
