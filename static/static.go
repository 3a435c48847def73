// Package static holds the dashboard's stylesheet, script and htmx,
// embedded in the binary and served under content-hashed names, so that
// browsers may cache them forever and never run a stale one.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed *.css *.js
var files embed.FS

var (
	hashed   = map[string]string{} // name → hashed name
	byHashed = map[string]string{} // hashed name → name
)

func init() {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		h := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:])[:12] + ext
		hashed[e.Name()] = h
		byHashed[h] = e.Name()
	}
}

// URL returns the path under which name is served, with its content hash;
// it panics on a name that is not embedded (a programming error).
func URL(name string) string {
	h, ok := hashed[name]
	if !ok {
		panic("static: no file " + name)
	}
	return "/static/" + h
}

// Handler serves the files under their hashed names (strip /static/
// first), cached for a year.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := byHashed[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFileFS(w, r, files, name)
	})
}
