package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/templates/htmltest"
)

// browser is a signed-in person's browser: cookies, and the CSRF token of
// the pages it was shown.
type browser struct {
	f      *fixture
	client *http.Client
	csrf   string
}

const testPassword = "correct horse battery"

// signIn creates the user (once) and signs in through the form.
func (f *fixture) signIn(t *testing.T, username string) *browser {
	t.Helper()
	if err := f.auth.SetPassword(f.ctx, username, testPassword); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	b := &browser{f: f, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	r := b.post(t, "/login", url.Values{"username": {username}, "password": {testPassword}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d: %s", r.status, r.body)
	}
	b.get(t, "/").want(t, http.StatusOK)
	return b
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches a page and remembers its CSRF token.
func (b *browser) get(t *testing.T, path string) *response {
	t.Helper()
	req, _ := http.NewRequestWithContext(b.f.ctx, http.MethodGet, b.f.srv.URL+path, nil)
	r := b.do(t, req)
	if m := csrfField.FindSubmatch(r.body); m != nil {
		b.csrf = string(m[1])
	}
	return r
}

// post submits a form as the browser would from a page of this site,
// with the page's CSRF token.
func (b *browser) post(t *testing.T, path string, form url.Values) *response {
	t.Helper()
	if b.csrf != "" && form.Get("_csrf") == "" {
		form.Set("_csrf", b.csrf)
	}
	req, _ := http.NewRequestWithContext(b.f.ctx, http.MethodPost, b.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.f.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(t, req)
}

func (b *browser) do(t *testing.T, req *http.Request) *response {
	t.Helper()
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: body}
}

// parseHTML parses an HTML answer, failing the test if it is not one.
func parseHTML(t *testing.T, r *response) htmltest.Doc {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want an HTML page; body: %.300s", ct, r.body)
	}
	return htmltest.Parse(t, string(r.body))
}
