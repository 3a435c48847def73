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
	ScreenCrash = "crash" // a dim screen with a dialog on it
	ScreenList  = "list"  // rows of an avatar and a line of text, on stripes
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
	blue, red := color.NRGBA{30, 90, 200, 255}, color.NRGBA{200, 40, 40, 255}
	// shade fills the screen with a background that brightens from left
	// to right (rising) or darkens: what a difference hash compares is
	// neighbouring columns, so the background is most of what tells two
	// flat synthetic screens apart, as a real screen's content would.
	shade := func(rising bool) {
		for x := range w {
			v := uint8(120 + 130*x/w)
			if !rising {
				v = uint8(250 - 130*x/w)
			}
			box(x, 0, x+1, h, color.NRGBA{v, v, v, 255})
		}
	}
	switch layout {
	case ScreenLogin:
		// A logo at the top left, labels and fields, a button at the right.
		shade(true)
		box(40, 120, 220, 300, blue)
		for i, y := range []int{420, 620} {
			box(40, y, 160+i*40, y+30, dark)
			box(40, y+50, 500, y+120, grey)
		}
		box(300, 880, 500, 960, blue)
		box(40, 1040, 200, 1070, grey)
	case ScreenCrash:
		// A dimmed screen, a dialog to the left with its title and a red
		// button at its bottom right.
		shade(false)
		box(30, 380, 420, 860, white)
		box(60, 420, 330, 470, dark)
		box(60, 520, 380, 540, grey)
		box(60, 570, 250, 590, grey)
		box(270, 760, 400, 830, red)
	case ScreenList:
		// Rows of an avatar at the left and a line of text of varying
		// length, on a striped screen with a red action button.
		box(0, 0, w, h, white)
		for x := 0; x < w; x += 120 {
			box(x, 0, x+60, h, grey) // striped columns, as a table has
		}
		for i, y := 0, 60; y < h-100; i, y = i+1, y+120 {
			box(20, y, 100, y+80, dark)
			box(120, y+20, 180+(i*97)%340, y+50, grey)
		}
		box(420, 1060, 520, 1160, red)
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
