package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The manual's files whose shell examples a newcomer pastes.
func manualFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "README.md"}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, docs...)
}

// shellBlocks are the fenced code blocks of a Markdown text whose
// language is sh, bash or unnamed, fences paired in order.
func shellBlocks(markdown string) []string {
	var blocks []string
	var cur strings.Builder
	in, shell := false, false
	for _, line := range strings.SplitAfter(markdown, "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "```") {
			if in && shell {
				cur.WriteString(strings.TrimLeft(line, " \t"))
			}
			continue
		}
		if in {
			if shell {
				blocks = append(blocks, cur.String())
			}
			cur.Reset()
			in = false
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(t, "```"))
		in, shell = true, lang == "sh" || lang == "bash" || lang == ""
	}
	return blocks
}

// shellCommands splits the code blocks of a Markdown text into logical
// command lines: a backslash-newline or a newline inside quotes continues
// the line. Quoted text is kept, with its quotes.
func shellCommands(markdown string) []string {
	var cmds []string
	for _, b := range shellBlocks(markdown) {
		var cur strings.Builder
		var quote rune
		block := []rune(b)
		for i := 0; i < len(block); i++ {
			r := block[i]
			switch {
			case quote != 0:
				if r == quote {
					quote = 0
				}
			case r == '\'' || r == '"':
				quote = r
			case r == '\\' && i+1 < len(block) && block[i+1] == '\n':
				i++
				cur.WriteRune(' ')
				continue
			case r == '#' && (cur.Len() == 0 || strings.HasSuffix(cur.String(), " ")):
				for i < len(block) && block[i] != '\n' {
					i++
				}
				i--
				continue
			case r == '\n':
				cmds = append(cmds, cur.String())
				cur.Reset()
				continue
			}
			cur.WriteRune(r)
		}
		cmds = append(cmds, cur.String())
	}
	return cmds
}

// unquotedVars are the $NAME references of s outside single quotes.
func unquotedVars(s string) []string {
	var names []string
	inSingle := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\'':
			inSingle = !inSingle
		case s[i] == '$' && !inSingle:
			j := i + 1
			if j < len(s) && s[j] == '{' {
				j++
			}
			k := j
			for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9' && k > j) {
				k++
			}
			if k > j {
				names = append(names, s[j:k])
			}
		}
	}
	return names
}

// TestManualCurlCommandsWork: every curl of the manual that sends a body
// to the API says it is JSON (without Content-Type the answer is 415),
// and every variable a curl uses is set in the same file (a $TOKEN where
// the file sets T is a 401 for whoever pastes it).
func TestManualCurlCommandsWork(t *testing.T) {
	t.Parallel()
	for _, file := range manualFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		curls := 0
		for _, cmd := range shellCommands(text) {
			for _, seg := range regexp.MustCompile(`\|\||&&|;|\|`).Split(cmd, -1) {
				seg = strings.TrimSpace(seg)
				for _, kw := range []string{"until ", "while ", "if ", "do ", "then ", "! ", "$("} {
					seg = strings.TrimSpace(strings.TrimPrefix(seg, kw))
				}
				if i := strings.Index(seg, "$(curl "); i >= 0 {
					seg = seg[i+2:]
				}
				if !strings.HasPrefix(seg, "curl ") {
					continue
				}
				curls++
				sendsBody := regexp.MustCompile(`(^|\s)(-d|--data|--data-binary|--data-raw)(\s|@|')`).MatchString(seg)
				if sendsBody && strings.Contains(seg, "/api/v1/") && !strings.Contains(seg, "Content-Type: application/json") {
					t.Errorf("%s: a curl sends a body without Content-Type: application/json (415):\n  %s", file, seg)
				}
				for _, name := range unquotedVars(seg) {
					if strings.HasPrefix(name, "LEASEHOLD_") { // the exec executor's environment
						continue
					}
					if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `=`).MatchString(text) {
						t.Errorf("%s: a curl uses $%s, which the file never sets:\n  %s", file, name, seg)
					}
				}
			}
		}
		if file == "../README.md" && curls == 0 {
			t.Fatalf("no curl found in %s: the parser is broken", file)
		}
	}
}

// The parser itself: a multi-line JSON body in quotes is one command,
// and a missing Content-Type or an unset variable is seen.
func TestShellCommandsJoinsQuotedLines(t *testing.T) {
	t.Parallel()
	md := "```sh\nT=x\ncurl -H \"Authorization: Bearer $TOKEN\" localhost:8080/api/v1/jobs -d '{\"a\":\n  1}'\necho done\n```\n"
	cmds := shellCommands(md)
	if len(cmds) != 4 || !strings.HasPrefix(cmds[1], "curl") || !strings.Contains(cmds[1], "1}'") {
		t.Fatalf("commands %q", cmds)
	}
	if v := unquotedVars(cmds[1]); len(v) != 1 || v[0] != "TOKEN" {
		t.Fatalf("vars %q", v)
	}
}

// TestManualUsesOneTokenVariable: every curl of the manual sends the
// admin token as $T, the name README sets first, so that a command
// pasted from one page into the shell of another is not a 401 (the
// Schedules example once used $TOKEN).
func TestManualUsesOneTokenVariable(t *testing.T) {
	t.Parallel()
	bearer := regexp.MustCompile(`Authorization: Bearer \$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	seen := 0
	for _, file := range manualFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range shellCommands(string(b)) {
			for _, m := range bearer.FindAllStringSubmatch(cmd, -1) {
				seen++
				if m[1] != "T" {
					t.Errorf("%s: a curl sends $%s, where the manual uses $T:\n  %s", file, m[1], cmd)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no bearer token found in the manual: the parser is broken")
	}
}
