package web_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/web"
)

const testReadTimeout = 300 * time.Millisecond

// TestStalledBodyIsCut: a request that announces a body and never sends
// it loses its connection at the read deadline, instead of holding it
// for good.
func TestStalledBodyIsCut(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{readTimeout: testReadTimeout})
	for _, tc := range []struct {
		name, head string
		status     int // 0: any answer, or none, as long as the connection ends
	}{
		{"SignIn", "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n", http.StatusRequestTimeout},
		{"SubmitJob", "POST /api/v1/jobs HTTP/1.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + f.admin + "\r\n", http.StatusRequestTimeout},
		{"Claim", "POST /api/v1/worker/claim HTTP/1.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + f.worker + "\r\n", http.StatusRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := fmt.Fprintf(conn, "%sHost: leasehold\r\nContent-Length: 100\r\n\r\n", tc.head); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			answer, err := io.ReadAll(conn)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("connection still open after %v: %v", took, err)
			}
			if took > testReadTimeout+3*time.Second {
				t.Errorf("connection held %v with a read deadline of %v", took, testReadTimeout)
			}
			if tc.status != 0 {
				res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(answer))), nil)
				if err != nil || res.StatusCode != tc.status {
					t.Errorf("answer %q, want status %d", answer, tc.status)
				}
			}
		})
	}
}

// TestLongPollOutlivesTheReadDeadline: a claim that has read its body
// waits past the read deadline and still gets the job submitted then.
// net/http's background read would cancel the request at the deadline if
// it were left set.
func TestLongPollOutlivesTheReadDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, setupOpts{readTimeout: testReadTimeout})
	got := make(chan []jobJSON, 1)
	go func() { got <- f.claimAs(t, f.worker, `{"wait_ms":10000}`) }()
	time.Sleep(4 * testReadTimeout) // the point: the deadline passes while the claim waits
	job := f.submit(t, `{"kind":"test"}`)
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].ID != job.ID {
			t.Fatalf("long poll returned %+v, want job %d", jobs, job.ID)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long-polling claim did not return")
	}
	// A body that arrives in time, slowly, is read in full.
	pr, pw := io.Pipe()
	go func() {
		for _, part := range []string{`{"kind":`, `"slow"}`} {
			_, _ = pw.Write([]byte(part))
			time.Sleep(testReadTimeout / 4)
		}
		pw.Close()
	}()
	f.do(t, call{method: http.MethodPost, path: "/api/v1/jobs", body: io.Reader(pr)}).want(t, http.StatusCreated)
}

// TestBodylessRequestsKeepTheirContext: a request without a body gets no
// read deadline: net/http reads ahead on its connection at once, and a
// deadline there would cancel the request's context mid-answer.
func TestBodylessRequestsKeepTheirContext(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e := web.New(web.Config{Pool: f.pool, Queue: f.queue, Tokens: f.tokens, Logger: testLogger(f.logs), ReadTimeout: testReadTimeout})
	e.GET("/slow", func(c echo.Context) error {
		select {
		case <-time.After(4 * testReadTimeout):
			return c.String(http.StatusOK, "waited")
		case <-c.Request().Context().Done():
			return c.String(http.StatusServiceUnavailable, "cancelled")
		}
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if string(body) != "waited" {
		t.Fatalf("a slow answer without a request body: %d %q", res.StatusCode, body)
	}
}
