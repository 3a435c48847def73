package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// linkedFiles are the Markdown files whose links a reader follows: the
// manual, the examples' guide and the changelog.
func linkedFiles(t *testing.T) []string {
	t.Helper()
	return append(manualFiles(t), "../CHANGELOG.md")
}

// markdownLink is an inline link or image, [text](target) or
// [text](target "title"); the target is group 1.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// markdownLinks are the link targets of a Markdown text outside code:
// fenced blocks and `inline code` are left out.
func markdownLinks(markdown string) []string {
	var links []string
	inFence := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "")
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
	}
	return links
}

// headingAnchors are the anchors GitHub gives a Markdown text's
// headings: lower case, punctuation dropped, spaces to hyphens, and a
// -1, -2… on repeats.
func headingAnchors(markdown string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestManualLinksResolve: every relative link of the manual leads to a
// file of the repository, and a #anchor to a heading of its Markdown
// file. README, docs/quickstart.md and docs/operating.md linked a
// docs/troubleshooting.md that did not exist.
func TestManualLinksResolve(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range linkedFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(b)) {
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(link) {
				continue // http:, https:, mailto:
			}
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %q: no such file %s", file, link, path)
				continue
			}
			if anchor == "" || st.IsDir() || !strings.HasSuffix(path, ".md") {
				continue
			}
			md, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(md))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", file, link, path, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser is broken")
	}
}

// The parser itself: links in code are not links, anchors follow
// GitHub's rules, and a missing file is seen.
func TestMarkdownLinksParser(t *testing.T) {
	t.Parallel()
	md := "See [a](docs/a.md#x-y) and ![p](p.png \"t\").\n`[no](code.md)`\n```\n[no](fence.md)\n```\n"
	if got := markdownLinks(md); len(got) != 2 || got[0] != "docs/a.md#x-y" || got[1] != "p.png" {
		t.Fatalf("links %q", got)
	}
	a := headingAnchors("# 415: \"Content-Type must be application/json\"\n## 4b. No public name: a private CA\n## Setup\n## Setup\n")
	for _, want := range []string{"415-content-type-must-be-applicationjson", "4b-no-public-name-a-private-ca", "setup", "setup-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
}

// TestTroubleshootingNamesEveryWaitKind: every kind of wait the API can
// answer has its own section in docs/troubleshooting.md, and no section
// says a kind the server sends is reserved (outside_window was still
// "reserved" there after windows were built, rate_limited after budgets
// were).
func TestTroubleshootingNamesEveryWaitKind(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(b))
	for _, kind := range queue.WaitKinds {
		if !anchors[string(kind)] {
			t.Errorf("docs/troubleshooting.md has no section ## %s", kind)
		}
	}
	sections := strings.Split(string(b), "\n## ")
	for _, s := range sections {
		title, body, _ := strings.Cut(s, "\n")
		if strings.Contains(body, "Reserved") {
			t.Errorf("docs/troubleshooting.md: section %q says it is reserved", title)
		}
	}
}
