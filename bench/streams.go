package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// signIn signs in to the server at base as the admin: a client with the
// session. (Signing in costs the server an argon2id hash, tens of MiB
// for a while: do it before measuring memory.)
func signIn(ctx context.Context, base, password string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"username": {"admin"}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("signing in: %w", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("signing in: status %d", res.StatusCode)
	}
	return c, nil
}

// openStreams opens n event streams (GET /events) with c's session, as n
// open dashboards would; each is read until ctx ends. It returns once
// every stream has its headers.
func openStreams(ctx context.Context, c *http.Client, base string, n int) error {
	// One connection per stream, as browsers (one per tab) do.
	c.Transport = &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
		if err != nil {
			return err
		}
		res, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			res.Body.Close()
			return fmt.Errorf("stream %d: status %d, %s", i, res.StatusCode, res.Header.Get("Content-Type"))
		}
		go func() {
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
			}
		}()
	}
	return nil
}
