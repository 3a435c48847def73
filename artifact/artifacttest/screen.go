package artifacttest

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"testing"
)

// Screen layouts: what a phone showed when an attempt failed.
const (
	ScreenLogin = "login" // a light form: logo, two fields, a button
	ScreenCrash = "crash" // a dim screen with a dialog in its middle
	ScreenList  = "list"  // a list of alternating rows
)

// Screen returns a 540×1200 PNG of a phone screen of the given layout,
// with clock drawn in its status bar (the top 3%): two screenshots of one
// screen taken a minute apart differ only there. Each digit of clock
// lights a different set of bars, so the clocks really differ.
func Screen(t testing.TB, layout, clock string) []byte {
	t.Helper()
	const w, h = 540, 1200
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	box := func(x0, y0, x1, y1 int, c color.Color) {
		draw.Draw(m, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
	}
	white, dark, grey := color.NRGBA{250, 250, 250, 255}, color.NRGBA{20, 20, 30, 255}, color.NRGBA{150, 150, 160, 255}
	switch layout {
	case ScreenLogin:
		box(0, 0, w, h, white)
		box(170, 150, 370, 350, color.NRGBA{30, 90, 200, 255})
		box(60, 500, 480, 580, grey)
		box(60, 640, 480, 720, grey)
		box(60, 820, 480, 900, color.NRGBA{30, 90, 200, 255})
	case ScreenCrash:
		box(0, 0, w, h, color.NRGBA{60, 60, 70, 255})
		box(40, 450, 500, 800, white)
		box(80, 500, 460, 540, dark)
		box(300, 700, 460, 760, color.NRGBA{200, 40, 40, 255})
	case ScreenList:
		box(0, 0, w, h, white)
		for y := 60; y < h; y += 160 {
			box(0, y, w, y+80, grey)
			box(20, y+10, 80, y+70, dark)
		}
	default:
		t.Fatalf("artifacttest.Screen: no layout %q", layout)
	}
	// The status bar: dark, with the clock's digits as light bars.
	bar := h * 3 / 100
	box(0, 0, w, bar, dark)
	for i, r := range clock {
		x := 20 + i*18
		for b := range 4 {
			if (int(r)>>b)&1 == 1 {
				box(x, 4+b*8, x+14, 8+b*8, white)
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
