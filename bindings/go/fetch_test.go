package sandgate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// loopbackServer is an httptest server on 127.0.0.1 that counts requests.
type loopbackServer struct {
	*httptest.Server
	port string
	hits atomic.Int64
}

func newLoopbackServer(t *testing.T, h http.HandlerFunc) *loopbackServer {
	t.Helper()
	s := &loopbackServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no IPv4 loopback: %v", err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.Server = srv
	s.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	return s
}

// noProxy clears the proxy variables: in restricted mode a configured
// proxy refuses every fetch, and the fetcher reads them when made.
func noProxy(t *testing.T) {
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(v, "")
	}
}

func newFetcher(t *testing.T, policy string) *sandgate.Fetcher {
	t.Helper()
	p, err := sandgate.ParsePolicy([]byte(policy), tmp(t))
	if err != nil {
		t.Fatalf("policy: %v\n%s", err, policy)
	}
	defer p.Close() // the fetcher outlives it
	f, err := sandgate.NewFetcher(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func loopbackPolicy(port, extra string) string {
	return fmt.Sprintf("[net]\nallow = [\"127.0.0.1:%s\"]\nallow_http = true\n%s", port, extra)
}

func fetchError(t *testing.T, err error) *sandgate.FetchError {
	t.Helper()
	var fe *sandgate.FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("not a *FetchError: %T %v", err, err)
	}
	var se *sandgate.Error
	if !errors.As(err, &se) || se != fe.Err {
		t.Fatalf("errors.As(*Error) does not reach FetchError.Err: %v", err)
	}
	return fe
}

func TestFetchLoopback(t *testing.T) {
	noProxy(t)
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Got-Header", r.Header.Get("X-Sandgate-Test"))
		w.Header().Add("X-Twice", "a")
		w.Header().Add("X-Twice", "b")
		switch r.URL.Path {
		case "/binary":
			w.Write([]byte{0xff, 0x00, 0xfe, 'x'})
		case "/echo":
			w.Write(b)
		case "/teapot":
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "short and stout")
		case "/big":
			w.Write(bytes.Repeat([]byte("z"), 5000))
		default:
			io.WriteString(w, "hello from loopback\n")
		}
	}
	srv := newLoopbackServer(t, echo)
	other := newLoopbackServer(t, echo) // a port the policy does not grant
	f := newFetcher(t, loopbackPolicy(srv.port, ""))
	ctx := context.Background()
	base := "http://127.0.0.1:" + srv.port

	t.Run("granted", func(t *testing.T) {
		r, err := f.Fetch(ctx, base+"/", sandgate.FetchOptions{
			Header: http.Header{"x-sandgate-test": {"yes"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || string(r.Body) != "hello from loopback\n" || r.Truncated {
			t.Fatalf("status %d body %q truncated %v", r.Status, r.Body, r.Truncated)
		}
		if got := r.Header.Get("X-Got-Header"); got != "yes" {
			t.Errorf("request header arrived as %q", got)
		}
		if got := r.Header.Get("X-Twice"); got != "a, b" {
			t.Errorf("repeated header %q, want %q", got, "a, b")
		}
		if got := r.Header.Get("Content-Type"); got == "" {
			t.Errorf("no Content-Type in %v", r.Header)
		}
		if len(r.Hops) != 1 {
			t.Fatalf("hops %+v", r.Hops)
		}
		h := r.Hops[0]
		if !h.Allowed || h.Status != 200 || h.Method != "GET" || h.Rule != "127.0.0.1:"+srv.port ||
			len(h.Addresses) != 1 || h.Addresses[0] != "127.0.0.1" || h.URL != base+"/" || h.Reason == "" {
			t.Errorf("hop %+v", h)
		}
	})

	t.Run("post_bodies", func(t *testing.T) {
		for _, body := range [][]byte{[]byte("text body é"), {0xff, 0xfe, 0x00, 0x80}} {
			r, err := f.Fetch(ctx, base+"/echo", sandgate.FetchOptions{Method: "POST", Body: body})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Body, body) || r.Header.Get("X-Method") != "POST" {
				t.Errorf("echoed %q (method %s), want %q", r.Body, r.Header.Get("X-Method"), body)
			}
		}
		r, err := f.Fetch(ctx, base+"/binary", sandgate.FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Body, []byte{0xff, 0x00, 0xfe, 'x'}) {
			t.Errorf("binary body %q", r.Body)
		}
	})

	t.Run("status_is_an_answer", func(t *testing.T) {
		r, err := f.Fetch(ctx, base+"/teapot", sandgate.FetchOptions{})
		if err != nil || r.Status != http.StatusTeapot || string(r.Body) != "short and stout" {
			t.Fatalf("%+v %v", r, err)
		}
	})

	t.Run("max_bytes", func(t *testing.T) {
		r, err := f.Fetch(ctx, base+"/big", sandgate.FetchOptions{MaxBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Body) != 100 || !r.Truncated {
			t.Errorf("%d bytes, truncated %v", len(r.Body), r.Truncated)
		}
	})

	t.Run("ungranted_port", func(t *testing.T) {
		before := other.hits.Load()
		_, err := f.Fetch(ctx, "http://127.0.0.1:"+other.port+"/", sandgate.FetchOptions{})
		if !errors.Is(err, sandgate.ErrNetDenied) || !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("want E_NET_DENIED, got %v", err)
		}
		fe := fetchError(t, err)
		if len(fe.Hops) != 1 || fe.Hops[0].Allowed || fe.Hops[0].Status != 0 || fe.Hops[0].Reason == "" ||
			fe.Hops[0].URL != "http://127.0.0.1:"+other.port+"/" || len(fe.Hops[0].Addresses) != 0 {
			t.Errorf("hops %+v", fe.Hops)
		}
		if fe.Rule != "" {
			t.Errorf("rule %q for an ungranted port", fe.Rule)
		}
		if other.hits.Load() != before {
			t.Error("the ungranted server was reached")
		}
	})

	t.Run("redirect_hop_refused", func(t *testing.T) {
		redir := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:"+other.port+"/", http.StatusFound)
		})
		f := newFetcher(t, fmt.Sprintf("[net]\nallow = [\"127.0.0.1:%s\", \"127.0.0.1:%s\"]\nallow_http = true\n", redir.port, other.port))
		before := other.hits.Load()
		_, err := f.Fetch(ctx, "http://127.0.0.1:"+redir.port+"/start", sandgate.FetchOptions{})
		if !errors.Is(err, sandgate.ErrNetDenied) {
			t.Fatalf("want E_NET_DENIED (a redirect hop never goes to loopback), got %v", err)
		}
		fe := fetchError(t, err)
		if len(fe.Hops) != 2 || !fe.Hops[0].Allowed || fe.Hops[0].Status != http.StatusFound || fe.Hops[1].Allowed {
			t.Errorf("hops %+v", fe.Hops)
		}
		if other.hits.Load() != before {
			t.Error("the redirect target was reached")
		}
		t.Logf("%v; rule %q; hops %+v", err, fe.Rule, fe.Hops)
	})

	t.Run("metadata_address", func(t *testing.T) {
		// The policy cannot grant it (net.allow refuses link-local entries
		// at load); the loopback policy, with allow_http, refuses it.
		if _, err := sandgate.ParsePolicy([]byte("[net]\nallow = [\"169.254.169.254\"]\nallow_http = true\n"), tmp(t)); !errors.Is(err, sandgate.ErrPolicy) {
			t.Errorf("granting the metadata address: want E_POLICY, got %v", err)
		}
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/"} {
			_, err := f.Fetch(ctx, u, sandgate.FetchOptions{})
			if !errors.Is(err, sandgate.ErrNetDenied) {
				t.Errorf("%s: want E_NET_DENIED, got %v", u, err)
				continue
			}
			fe := fetchError(t, err)
			if len(fe.Hops) != 1 || fe.Hops[0].Allowed || len(fe.Hops[0].Addresses) != 0 || fe.Hops[0].Reason == "" {
				t.Errorf("%s: hops %+v", u, fe.Hops)
			}
			t.Logf("%s: %v", u, err)
		}
	})

	t.Run("request_refusals", func(t *testing.T) {
		for _, o := range []sandgate.FetchOptions{
			{Header: http.Header{"Host": {"internal"}}},
			{Method: "CONNECT"},
			{Timeout: -time.Second},
			{MaxBytes: -1},
		} {
			if _, err := f.Fetch(ctx, base+"/", o); !errors.Is(err, sandgate.ErrRequest) {
				t.Errorf("%+v: want E_REQUEST, got %v", o, err)
			}
		}
		if _, err := f.Fetch(ctx, "http://127.0.0.1:"+srv.port+"/\xff", sandgate.FetchOptions{}); !errors.Is(err, sandgate.ErrRequest) {
			t.Errorf("non-UTF-8 URL: %v", err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 5; j++ {
					r, err := f.Fetch(ctx, base+"/", sandgate.FetchOptions{})
					if err != nil || r.Status != 200 {
						t.Errorf("%v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestFetchBudget(t *testing.T) {
	noProxy(t)
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	f := newFetcher(t, loopbackPolicy(srv.port, "\n[budgets]\nnet_ops = 1\n"))
	url := "http://127.0.0.1:" + srv.port + "/"

	// A fetch not started (ctx already done) spends nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Fetch(ctx, url, sandgate.FetchOptions{})
	if !errors.Is(err, sandgate.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if srv.hits.Load() != 0 {
		t.Fatal("a cancelled fetch reached the server")
	}

	r, err := f.Fetch(context.Background(), url, sandgate.FetchOptions{})
	if err != nil || r.Status != 200 || string(r.Body) != "ok" {
		t.Fatalf("first fetch: %+v %v", r, err)
	}
	_, err = f.Fetch(context.Background(), url, sandgate.FetchOptions{})
	if !errors.Is(err, sandgate.ErrDenied) {
		t.Fatalf("second fetch: want E_DENIED (net_ops spent), got %v", err)
	}
	if fe := fetchError(t, err); len(fe.Hops) != 0 {
		t.Errorf("a spent budget refuses before any hop: %+v", fe.Hops)
	}
	if srv.hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1", srv.hits.Load())
	}
}

func TestFetchContextDeadline(t *testing.T) {
	noProxy(t)
	release := make(chan struct{})
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "late")
	})
	defer close(release) // before srv.Close (a cleanup) waits for the handler
	f := newFetcher(t, loopbackPolicy(srv.port, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.Fetch(ctx, "http://127.0.0.1:"+srv.port+"/", sandgate.FetchOptions{Timeout: time.Minute})
	if !errors.Is(err, sandgate.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want E_TIMEOUT and DeadlineExceeded, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the ctx deadline did not bound the fetch: %v", d)
	}
	fe := fetchError(t, err)
	t.Logf("%v after %v; hops %+v", err, time.Since(start), fe.Hops)
}

// A fetch held by a listener that takes the connection into its backlog
// and never answers: only the ctx's cancel ends it before its 30 s timeout.
// A ctx already cancelled spends no budget: of the budget of 2, the last
// unit still pays for a fetch (which times out).
func TestFetchCancelledDuringTheCallEndsIt(t *testing.T) {
	noProxy(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	f := newFetcher(t, loopbackPolicy(port, "[budgets]\nnet_ops = 2\n"))
	url := "http://127.0.0.1:" + port + "/held"
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = f.Fetch(ctx, url, sandgate.FetchOptions{Timeout: 30 * time.Second})
	took := time.Since(start)
	if !errors.Is(err, sandgate.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("want E_ABORTED and context.Canceled, got %v after %v", err, took)
	}
	// Not a speed claim: a fetch the cancel did not end takes 30 s.
	if took > 10*time.Second {
		t.Fatalf("the cancel did not end the fetch: %v", took)
	}
	if fe := fetchError(t, err); len(fe.Hops) != 1 || !fe.Hops[0].Allowed {
		t.Errorf("hops: %+v", fe.Hops)
	}
	if _, err := f.Fetch(ctx, url, sandgate.FetchOptions{}); !errors.Is(err, sandgate.ErrAborted) {
		t.Fatalf("a done ctx: want E_ABORTED, got %v", err)
	}
	if _, err := f.Fetch(context.Background(), url, sandgate.FetchOptions{Timeout: 200 * time.Millisecond}); !errors.Is(err, sandgate.ErrTimeout) {
		t.Fatalf("the budget's last unit: want E_TIMEOUT, got %v", err)
	}
	if _, err := f.Fetch(context.Background(), url, sandgate.FetchOptions{Timeout: 200 * time.Millisecond}); !errors.Is(err, sandgate.ErrDenied) {
		t.Fatalf("a spent budget: want E_DENIED, got %v", err)
	}
}

func TestFetcherClosed(t *testing.T) {
	f := newFetcher(t, "[net]\nallow = []\n")
	f.Close()
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	_, err := f.Fetch(context.Background(), "https://api.example.com/", sandgate.FetchOptions{})
	if !errors.Is(err, sandgate.ErrClosed) || !errors.Is(err, fs.ErrClosed) {
		t.Errorf("closed fetcher: %v", err)
	}
	p, err := sandgate.ParsePolicy([]byte("[net]\nallow = []\n"), tmp(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := sandgate.NewFetcher(p); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("fetcher from a closed policy: %v", err)
	}
}

// The fetcher's audit sink: one event per Fetch, made or refused (a URL
// that does not parse, credentials in the URL, a host not granted, a
// redirect refused, a ctx already done, the budget spent), by the origins
// of its hops; the string SECRET, in the URL's query, user or a header,
// never reaches it. The callback may call back into its fetcher, Close
// included, and the fetcher is freed when the Fetch it ran in returns.
func TestFetchAuditRecordsEveryFetchWithoutItsSecrets(t *testing.T) {
	noProxy(t)
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/meta" {
			http.Redirect(w, r, "http://169.254.169.254/SECRET7?k=SECRET8", http.StatusFound)
			return
		}
		io.WriteString(w, "hello")
	})
	here := "http://127.0.0.1:" + srv.port
	p, err := sandgate.ParsePolicy([]byte(loopbackPolicy(srv.port, "[budgets]\nnet_ops = 6\n")), tmp(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var (
		mu     sync.Mutex
		events []sandgate.AuditEvent
		f      *sandgate.Fetcher
		nested error
	)
	audit := func(e sandgate.AuditEvent) {
		mu.Lock()
		events = append(events, e)
		n := len(events)
		mu.Unlock()
		switch {
		case n == 1: // a fetch of its own, reported one level deeper
			_, nested = f.Fetch(context.Background(), "", sandgate.FetchOptions{})
		case e.Outcome == sandgate.CodeDenied: // the budget spent: close
			f.Close()
		}
	}
	f, err = sandgate.NewFetcher(p, sandgate.WithFetchAudit(audit))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	secret := sandgate.FetchOptions{Header: http.Header{"Authorization": {"Bearer SECRET1"}}, Timeout: 10 * time.Second}
	if _, err := f.Fetch(context.Background(), here+"/p/SECRET2?token=SECRET3", secret); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(nested, sandgate.ErrRequest) {
		t.Errorf("the callback's own fetch: %v", nested)
	}
	for _, c := range []struct {
		url  string
		want error
	}{
		{"not a url SECRET4", sandgate.ErrRequest},
		{"http://me:SECRET5@127.0.0.1:" + srv.port + "/", sandgate.ErrRequest},
		{"http://not-granted.invalid/?token=SECRET6", sandgate.ErrNetDenied},
		{here + "/meta", sandgate.ErrNetDenied},
	} {
		if _, err := f.Fetch(context.Background(), c.url, secret); !errors.Is(err, c.want) {
			t.Errorf("%s: want %v, got %v", c.url, c.want, err)
		}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Fetch(done, here+"/?token=SECRET9", secret); !errors.Is(err, sandgate.ErrAborted) {
		t.Errorf("a ctx already done: %v", err)
	}
	if _, err := f.Fetch(context.Background(), here+"/?token=SECRET10", secret); !errors.Is(err, sandgate.ErrDenied) {
		t.Errorf("the budget spent: %v", err)
	}
	if _, err := f.Fetch(context.Background(), here+"/", secret); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("closed from the callback: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := fmt.Sprintf("%+v", events); bytes.Contains([]byte(s), []byte("SECRET")) {
		t.Errorf("a secret reached the sink: %s", s)
	}
	type row struct {
		op, path string
		size     uint64
		outcome  sandgate.Code
	}
	var got []row
	for _, e := range events {
		got = append(got, row{e.Op, e.Path, e.Size, e.Outcome})
	}
	want := []row{
		{"fetch", here, 5, "OK"},
		{"fetch", "", 0, sandgate.CodeRequest},
		{"fetch", "", 0, sandgate.CodeRequest},
		{"fetch", "", 0, sandgate.CodeRequest},
		{"fetch", "http://not-granted.invalid:80", 0, sandgate.CodeNetDenied},
		{"fetch", here + " -> http://169.254.169.254:80", 0, sandgate.CodeNetDenied},
		{"fetch", "", 0, sandgate.CodeAborted},
		{"fetch", here, 0, sandgate.CodeDenied},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}
