package screenhash_test

import (
	"image"
	"image/color"
	"image/draw"
)

// The tests draw phone screens the size of a common 1080×2400 phone (a
// density of 2.625, so a 24 dp status bar is 63 px tall), each a layout of
// blocks, text-like stripes and icons in the colours of a real app.
const (
	screenW = 1080
	screenH = 2400

	// statusBarH is the status bar the tests draw: the top 3% of the
	// screen, a little more than the 63 px of this density.
	statusBarH = screenH * 3 / 100
)

var (
	white     = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	black     = color.NRGBA{0x00, 0x00, 0x00, 0xff}
	ink       = color.NRGBA{0x20, 0x21, 0x24, 0xff} // body text
	hint      = color.NRGBA{0x80, 0x86, 0x8b, 0xff} // secondary text, outlines
	rule      = color.NRGBA{0xe0, 0xe0, 0xe0, 0xff} // dividers
	surface   = color.NRGBA{0xf1, 0xf3, 0xf4, 0xff} // bars, cards
	primary   = color.NRGBA{0x1a, 0x73, 0xe8, 0xff}
	appBar    = color.NRGBA{0x0d, 0x47, 0xa1, 0xff}
	accent    = color.NRGBA{0xd9, 0x30, 0x25, 0xff}
	darkPanel = color.NRGBA{0x28, 0x28, 0x28, 0xff}
	avatars   = []color.NRGBA{
		{0xf4, 0xb4, 0x00, 0xff}, {0x0f, 0x9d, 0x58, 0xff}, {0xab, 0x47, 0xbc, 0xff},
		{0xff, 0x70, 0x43, 0xff}, {0x00, 0xac, 0xc1, 0xff}, {0x5c, 0x6b, 0xc0, 0xff},
	}
)

// statusBar is what the status bar shows at one moment: the clock, how
// many notification icons sit beside it, and the battery level.
type statusBar struct {
	clock         string // digits and ':'
	notifications int
	batteryPct    int
}

var (
	morning = statusBar{clock: "9:41", notifications: 1, batteryPct: 80}
	noon    = statusBar{clock: "12:07", notifications: 4, batteryPct: 15}
)

// layout is one app screen: the colours of its status bar and what it
// draws below it.
type layout struct {
	name       string
	barBG      color.NRGBA
	barFG      color.NRGBA
	drawScreen func(m *image.RGBA)
}

var layouts = []layout{
	{"Login", white, ink, drawLogin},
	{"CrashDialog", black, white, drawCrashDialog},
	{"Feed", appBar, white, drawFeed},
	{"VideoPlayer", black, white, drawPlayer},
}

// render draws layout l with status bar s on a new 1080×2400 image. It
// returns *image.NRGBA, what the PNG decoder returns for a screenshot.
func render(l layout, s statusBar) *image.NRGBA {
	// draw is fast only into *image.RGBA. Every pixel of a screen is
	// opaque, where RGBA and NRGBA store the same bytes, so the NRGBA can
	// share them.
	m := image.NewRGBA(image.Rect(0, 0, screenW, screenH))
	l.drawScreen(m)
	fill(m, 0, 0, screenW, statusBarH, l.barBG)
	drawStatusBar(m, s, l.barFG)
	return &image.NRGBA{Pix: m.Pix, Stride: m.Stride, Rect: m.Rect}
}

func fill(m draw.Image, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(m, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Over)
}

// outline draws a rectangle's border, w pixels thick.
func outline(m draw.Image, x0, y0, x1, y1, w int, c color.Color) {
	fill(m, x0, y0, x1, y0+w, c)
	fill(m, x0, y1-w, x1, y1, c)
	fill(m, x0, y0, x0+w, y1, c)
	fill(m, x1-w, y0, x1, y1, c)
}

// text draws a line of text as words: blocks of varied widths, h pixels
// tall, from x0 to at most x1. seed varies the words from line to line.
func text(m draw.Image, x0, y, x1, h, seed int, c color.Color) {
	widths := []int{90, 140, 60, 110, 75, 125, 50}
	x := x0
	for i := seed; ; i++ {
		w := widths[i%len(widths)] * h / 40
		if x+w > x1 {
			return
		}
		fill(m, x, y, x+w, y+h, c)
		x += w + h/2
	}
}

// segments are the seven segments of a digit in a 24×40 box, as
// rectangles (x0, y0, x1, y1), in the order a, b, c, d, e, f, g.
var segments = [7][4]int{
	{0, 0, 24, 6}, {18, 0, 24, 20}, {18, 20, 24, 40}, {0, 34, 24, 40},
	{0, 20, 6, 40}, {0, 0, 6, 20}, {0, 17, 24, 23},
}

// digitSegments lists which segments each digit lights, a to g.
var digitSegments = [10]string{
	"abcdef", "bc", "abdeg", "abcdg", "bcfg", "acdfg", "acdefg", "abc", "abcdefg", "abcdfg",
}

func drawStatusBar(m *image.RGBA, s statusBar, fg color.NRGBA) {
	const top = 16 // the glyphs are 40 px tall, centred in the 72 px bar
	x := 40
	for _, r := range s.clock {
		if r == ':' {
			fill(m, x, top+10, x+6, top+16, fg)
			fill(m, x, top+26, x+6, top+32, fg)
			x += 16
			continue
		}
		for _, seg := range digitSegments[r-'0'] {
			b := segments[seg-'a']
			fill(m, x+b[0], top+b[1], x+b[2], top+b[3], fg)
		}
		x += 34
	}
	x += 20
	for range s.notifications {
		fill(m, x, top+2, x+36, top+38, fg)
		x += 56
	}

	// Signal, Wi-Fi, then the battery, from the right edge.
	for i := range 4 {
		bx := 820 + i*14
		fill(m, bx, top+40-10*(i+1), bx+10, top+40, fg)
	}
	fill(m, 900, top+8, 940, top+40, fg)
	outline(m, 960, top+4, 1040, top+40, 4, fg)
	fill(m, 964, top+8, 964+72*s.batteryPct/100, top+36, fg)
}

// drawLogin draws a sign-in form: a logo, two outlined fields, a wide
// button and links, on white.
func drawLogin(m *image.RGBA) {
	fill(m, 0, 0, screenW, screenH, white)
	fill(m, 420, 380, 660, 620, primary)
	text(m, 380, 700, 720, 56, 0, ink)
	text(m, 200, 800, 900, 32, 3, hint)
	for _, y := range []int{960, 1180} {
		outline(m, 80, y, 1000, y+160, 4, hint)
		text(m, 130, y+62, 600, 36, y, hint)
	}
	text(m, 640, 1380, 1000, 32, 2, primary)
	fill(m, 80, 1500, 1000, 1640, primary)
	text(m, 420, 1550, 700, 40, 1, white)
	text(m, 330, 1740, 760, 36, 4, primary)
	text(m, 120, 2240, 960, 28, 5, hint)
	text(m, 300, 2290, 800, 28, 6, hint)
}

// drawCrashDialog draws Android's "app keeps stopping" dialog over the
// dimmed home screen the crash left behind.
func drawCrashDialog(m *image.RGBA) {
	// The wallpaper: a vertical gradient, teal to violet.
	for y := range screenH {
		t := y * 255 / screenH
		fill(m, 0, y, screenW, y+1, color.NRGBA{uint8(0x00 + t/3), uint8(0x89 - t/3), uint8(0x7b + t/2), 0xff})
	}
	// A grid of app icons with their labels, and the dock.
	for row := range 5 {
		for col := range 4 {
			x, y := 90+col*250, 300+row*330
			fill(m, x, y, x+150, y+150, avatars[(row+col)%len(avatars)])
			text(m, x+10, y+180, x+140, 26, row+col, white)
		}
	}
	fill(m, 40, 2050, 1040, 2250, color.NRGBA{0xff, 0xff, 0xff, 0x60})
	for col := range 4 {
		x := 90 + col*250
		fill(m, x, 2075, x+150, 2225, avatars[(col+3)%len(avatars)])
	}
	fill(m, 0, 0, screenW, screenH, color.NRGBA{0, 0, 0, 0x99}) // the dim

	fill(m, 90, 960, 990, 1480, white)
	text(m, 150, 1030, 900, 48, 2, ink)
	for i, y := range []int{1170, 1310} {
		fill(m, 150, y, 210, y+60, hint)
		text(m, 250, y+12, 700, 36, i+4, ink)
	}
}

// drawFeed draws a list screen: an app bar, rows of avatar, title and
// subtitle between dividers, a floating action button and a bottom
// navigation bar.
func drawFeed(m *image.RGBA) {
	fill(m, 0, 0, screenW, screenH, white)
	fill(m, 0, 0, screenW, 240, appBar)
	text(m, 60, 130, 600, 48, 0, white)
	fill(m, 880, 130, 928, 178, white)
	fill(m, 980, 130, 1028, 178, white)
	for i, y := 0, 240; y+220 <= 2160; i, y = i+1, y+220 {
		fill(m, 48, y+50, 168, y+170, avatars[i%len(avatars)])
		text(m, 210, y+60, 980, 40, i, ink)
		text(m, 210, y+130, 820, 30, i+3, hint)
		fill(m, 210, y+218, screenW, y+220, rule)
	}
	fill(m, 860, 1940, 1020, 2100, accent)
	fill(m, 920, 2000, 960, 2040, white)
	fill(m, 0, 2160, screenW, screenH, surface)
	for i := range 4 {
		x := 105 + i*270
		fill(m, x, 2210, x+60, 2270, hint)
		text(m, x-20, 2300, x+80, 24, i, hint)
	}
}

// drawPlayer draws a video player: a 16:9 frame on black, a seek bar,
// the title and dark rows of related videos.
func drawPlayer(m *image.RGBA) {
	fill(m, 0, 0, screenW, screenH, black)
	// The frame: a sky, a hill and a sun.
	fill(m, 0, 180, screenW, 788, color.NRGBA{0x87, 0xce, 0xeb, 0xff})
	fill(m, 0, 560, screenW, 788, color.NRGBA{0x3c, 0x8d, 0x2f, 0xff})
	fill(m, 760, 260, 900, 400, color.NRGBA{0xff, 0xe0, 0x66, 0xff})
	fill(m, 500, 444, 580, 524, white) // the play button
	fill(m, 0, 784, screenW, 790, hint)
	fill(m, 0, 784, 400, 790, accent)
	text(m, 40, 840, 1000, 48, 1, white)
	text(m, 40, 920, 700, 30, 4, hint)
	for i, y := 0, 1040; y+260 <= screenH; i, y = i+1, y+290 {
		fill(m, 40, y, 440, y+225, darkPanel)
		text(m, 480, y+20, 1040, 36, i, white)
		text(m, 480, y+80, 900, 28, i+2, hint)
	}
}
