package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execHelperCommand is an exec command line that runs this test binary as the
// child process in the given mode (see execHelperMain), so the tests need
// nothing installed.
func execHelperCommand(mode string, args ...string) string {
	parts := []string{execShellQuote(os.Args[0]), "-test.run=^TestHelperProcess$", "--", mode}
	for _, a := range args {
		parts = append(parts, execShellQuote(a))
	}
	return strings.Join(parts, " ")
}

func execShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestHelperProcess is not a test: it is the child process of the exec
// tests, selected by the arguments after "--".
func TestHelperProcess(t *testing.T) {
	args := os.Args
	for len(args) > 0 && args[0] != "--" {
		args = args[1:]
	}
	if len(args) < 2 {
		return // an ordinary test run
	}
	os.Exit(execHelperMain(args[1], args[2:]))
}

func execHelperMain(mode string, args []string) int {
	switch mode {
	case "env":
		stdin, _ := io.ReadAll(os.Stdin)
		env := map[string]string{}
		for _, name := range []string{"LEASEHOLD_JOB_ID", "LEASEHOLD_JOB_KIND", "LEASEHOLD_ATTEMPT",
			"LEASEHOLD_LEASE_TOKEN", "LEASEHOLD_ARTIFACT_DIR", "LEASEHOLD_EFFECTS_URL", "PATH"} {
			env[name] = os.Getenv(name)
		}
		info, err := os.Stat(os.Getenv("LEASEHOLD_ARTIFACT_DIR"))
		dirMode := ""
		if err == nil && info.IsDir() {
			dirMode = info.Mode().Perm().String()
		}
		execPrintJSON(map[string]any{"result": map[string]any{"stdin": string(stdin), "env": env, "dir_mode": dirMode}})
	case "events":
		fmt.Println("plain log line")
		fmt.Println(`{"progress":0.25,"message":"opened settings","step":1}`)
		fmt.Fprintln(os.Stderr, "warning: something")
		fmt.Println(`{"message":"no fraction"}`)
		fmt.Println(`{"progress":0.5,"step":2.5}`)
		fmt.Println(`{"not":"an event"}`)
		fmt.Println(`[1,2]`)
		fmt.Println(`{"result":{"n":1}}`)
		fmt.Println(`{"result":{"n":2}}`)
	case "checkpoint":
		// Resumes after LEASEHOLD_CHECKPOINT's step, if any; saves a
		// checkpoint for each step it runs, among lines the executor must
		// not take for one.
		var cp struct {
			Step  int            `json:"step"`
			State map[string]any `json:"state"`
		}
		raw, given := os.LookupEnv("LEASEHOLD_CHECKPOINT")
		if given {
			if err := json.Unmarshal([]byte(raw), &cp); err != nil {
				fmt.Fprintln(os.Stderr, "bad LEASEHOLD_CHECKPOINT:", err)
				return 1
			}
		}
		var ran []int
		for step := cp.Step + 1; step <= 5; step++ {
			ran = append(ran, step)
			fmt.Printf(`{"checkpoint":{"step":%d,"state":{"done":%d}},"progress":%.1f,"message":"step %d","step":%d}`+"\n", step, step, float64(step)/5, step, step)
		}
		fmt.Println(`{"checkpoint":{"step":-1,"state":{}}}`)
		fmt.Println(`{"checkpoint":{"step":2.5,"state":{}}}`)
		fmt.Println(`{"checkpoint":{"step":3,"state":[1]}}`)
		fmt.Println(`{"checkpoint":{"state":{}}}`)
		execPrintJSON(map[string]any{"result": map[string]any{"given": given, "raw": raw, "ran": ran}})
	case "usage":
		fmt.Println(`{"usage":{"model":"gpt-x","input_tokens":1200,"output_tokens":300,"cost_micros":4500,"counters":{"screens":3}}}`)
		fmt.Println(`{"usage":{"model":"gpt-x","cost_micros":1.5}}`)               // not an integer: refused
		fmt.Println(`{"usage":{"model":"gpt-x","cents":1}}`)                       // an unknown field: refused
		fmt.Println(`{"usage":{"model":"gpt-x","input_tokens":-1}}`)               // the queue's bounds: refused
		fmt.Println(`{"progress":0.5,"usage":{"currency":"EUR","cost_micros":7}}`) // both on one line
		fmt.Println(`{"result":{"ok":true}}`)
	case "longline":
		fmt.Println(strings.Repeat("x", execMaxLine+execMaxLine/2))
		fmt.Println(`{"result":{"ok":true}}`)
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Fprintln(os.Stderr, "first line")
		fmt.Fprintln(os.Stderr, "last words")
		return code
	case "screens":
		return execHelperScreens(args[0])
	case "effects":
		return execHelperEffects()
	case "stubborn":
		// Ignores SIGTERM, and so does the grandchild it starts.
		signal.Ignore(syscall.SIGTERM)
		pid, err := startExecHelper("sleep", "ignore-term")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf(`{"progress":0.1,"message":"pids %d %d"}`+"\n", os.Getpid(), pid)
		time.Sleep(time.Hour)
	case "background":
		// Leaves a grandchild running that holds stdout, like `sleep 1000 &`.
		pid, err := startExecHelper("sleep")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		execPrintJSON(map[string]any{"result": map[string]any{"grandchild": pid}})
	case "sleep":
		if len(args) > 0 && args[0] == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(time.Hour)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	return 0
}

// startExecHelper starts a grandchild in mode, sharing this process's stdout
// and stderr, and does not wait for it.
func startExecHelper(mode string, args ...string) (int, error) {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperProcess$", "--", mode}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// execHelperScreens writes a screenshot, waits until gate/go exists (the test
// creates it once it has seen the upload), then leaves more files.
func execHelperScreens(gate string) int {
	dir := os.Getenv("LEASEHOLD_ARTIFACT_DIR")
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	write("shot1.png", execTestPNG(1))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(gate, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "shot1.png was not uploaded while running")
			return 1
		}
	}
	write("notes.txt", []byte("found a crash\n"))
	write("ui.XML", []byte("<hierarchy/>\n"))
	write("late.PNG", execTestPNG(2))
	write("bad.png", []byte("not an image"))
	write("other.bin", []byte{1, 2, 3})
	write(".hidden.png", execTestPNG(3))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		return 1
	}
	write("sub/nested.png", execTestPNG(4))
	return 0
}

// execHelperEffects sends the requests of its payload ({"requests":[{"path",
// "body"}]}) to LEASEHOLD_EFFECTS_URL and returns the answers as its
// result.
func execHelperEffects() int {
	var payload struct {
		Requests []struct {
			Path string `json:"path"`
			Body string `json:"body"`
		} `json:"requests"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&payload); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	base := os.Getenv("LEASEHOLD_EFFECTS_URL")
	type answer struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	var answers []answer
	for _, rq := range payload.Requests {
		url := base + rq.Path
		if strings.HasPrefix(rq.Path, "//") { // relative to the host: a guessed prefix
			url = base[:strings.LastIndexByte(base, '/')] + rq.Path[1:]
		}
		resp, err := http.Post(url, "application/json", strings.NewReader(rq.Body))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, answer{resp.StatusCode, strings.TrimSpace(string(body))})
	}
	execPrintJSON(map[string]any{"result": map[string]any{"answers": answers}})
	return 0
}

func execPrintJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// execTestPNG is a small valid PNG, different for every n.
func execTestPNG(n int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(0, 0, color.RGBA{R: uint8(n), A: 255})
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}
