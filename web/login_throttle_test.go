package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
	"github.com/leasehold/leasehold/web"
)

// behindProxy serves f's database with trusted proxies, as a server
// behind Caddy would be.
func behindProxy(t *testing.T, f *fixture, trusted string) *httptest.Server {
	t.Helper()
	proxies, err := web.ParseTrustedProxies(trusted)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Config{
		Pool: f.pool, Queue: f.queue, Tokens: f.tokens, Logger: testLogger(f.logs),
		ArtifactsDir: t.TempDir(), Metrics: f.metrics, Auth: f.auth, TrustedProxies: proxies,
	}))
	t.Cleanup(srv.Close)
	return srv
}

// signInAnswer is what a sign-in attempt got back.
type signInAnswer struct {
	status     int
	message    string // the page's login-error text
	retryAfter string
}

// signInAttempt posts the sign-in form to srv, with X-Forwarded-For xff
// unless it is empty.
func signInAttempt(t *testing.T, srv *httptest.Server, xff, username, password string) signInAnswer {
	t.Helper()
	form := url.Values{"username": {username}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := readResponse(t, res)
	a := signInAnswer{status: r.status, retryAfter: r.header.Get("Retry-After")}
	if r.status != http.StatusSeeOther {
		if n := parseHTML(t, r).All("login-error"); len(n) == 1 {
			a.message = htmltest.Text(n[0])
		}
	}
	return a
}

func readResponse(t *testing.T, res *http.Response) *response {
	t.Helper()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: body}
}

func TestSignInUnknownNameLooksLikeKnown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if err := f.auth.SetPassword(f.ctx, "bob", testPassword); err != nil {
		t.Fatal(err)
	}
	answers := map[string][]signInAnswer{}
	for _, name := range []string{"bob", "nobody"} {
		for range 6 {
			answers[name] = append(answers[name], signInAttempt(t, f.srv, "", name, "wrong-password"))
		}
	}
	known, unknown := answers["bob"], answers["nobody"]
	for i := range known {
		want := http.StatusUnauthorized
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		if known[i] != unknown[i] || known[i].status != want || known[i].message == "" {
			t.Fatalf("attempt %d: known name %+v, unknown name %+v, want both %d with the same message", i+1, known[i], unknown[i], want)
		}
	}
	if known[5].retryAfter != "1" {
		t.Fatalf("429 with Retry-After %q, want 1", known[5].retryAfter)
	}
}

func TestSignInLockoutIsPerClientAddress(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if err := f.auth.SetPassword(f.ctx, "admin", testPassword); err != nil {
		t.Fatal(err)
	}
	proxied := behindProxy(t, f, "127.0.0.1")
	const stranger, admin = "203.0.113.1", "203.0.113.2"
	for range 5 {
		signInAttempt(t, proxied, stranger, "admin", "wrong-password")
	}
	// The first lock lasts a second, and a sign-in that hashes a password
	// takes longer than that under -race on a loaded machine: the refused
	// attempts (which hash nothing) come first, the admin's last.
	if a := signInAttempt(t, proxied, stranger, "admin", testPassword); a.status != http.StatusTooManyRequests {
		t.Fatalf("the stranger's address, right password: %+v, want 429", a)
	}
	// A client cannot pose as another by sending its own X-Forwarded-For:
	// the proxy appends the real peer, and that one counts.
	if a := signInAttempt(t, proxied, admin+", "+stranger, "admin", testPassword); a.status != http.StatusTooManyRequests {
		t.Fatalf("the stranger claiming the admin's address: %+v, want 429", a)
	}
	if a := signInAttempt(t, proxied, admin, "admin", testPassword); a.status != http.StatusSeeOther {
		t.Fatalf("the admin's address while a stranger is locked out: %+v, want signed in", a)
	}
}

func TestXForwardedForIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		name, trusted string
		believed      bool
	}{
		{name: "NoProxies", trusted: ""},
		// Loopback and private ranges are not trusted unless listed.
		{name: "OtherProxies", trusted: "10.0.0.0/8, 192.168.0.0/16, fd00::/8"},
		{name: "LoopbackListed", trusted: "10.0.0.1,127.0.0.0/8", believed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.ToLower(tc.name)
			if err := f.auth.SetPassword(f.ctx, user, testPassword); err != nil {
				t.Fatal(err)
			}
			srv := behindProxy(t, f, tc.trusted)
			for range 5 {
				signInAttempt(t, srv, "198.51.100.1", user, "wrong-password")
			}
			a := signInAttempt(t, srv, "198.51.100.2", user, testPassword)
			if tc.believed && a.status != http.StatusSeeOther {
				t.Fatalf("another forwarded client, from a trusted proxy: %+v, want signed in", a)
			}
			if !tc.believed && a.status != http.StatusTooManyRequests {
				t.Fatalf("another forwarded client, from an untrusted peer: %+v, want 429 (the peer is locked)", a)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := web.ParseTrustedProxies(" 10.1.2.3/8, 192.0.2.7,,2001:db8::1/32 , ::1")
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("::1/128"),
	}
	if err != nil || len(got) != len(want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if got, err := web.ParseTrustedProxies(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.internal", "300.1.2.3", "fe80::1%eth0", "10.0.0.1-10.0.0.9"} {
		if _, err := web.ParseTrustedProxies("10.0.0.1," + bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("%q: error %v, want one naming it", bad, err)
		}
	}
}
