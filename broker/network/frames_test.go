package network

import "testing"

// TestFramePool checks the size classes of the response frame pool: a
// frame has room for what was asked, pooled sizes come in their class's
// power of two, and a frame given back is handed out again only for its
// class, never one that outgrew its class or was not pooled.
func TestFramePool(t *testing.T) {
	for _, tc := range []struct{ n, wantCap int }{
		{64, 64},
		{8 << 10, 8 << 10},
		{8<<10 + 1, 16 << 10},
		{16 << 10, 16 << 10},
		{16<<10 + 1, 32 << 10},
		{1 << 20, 1 << 20},
		{16 << 20, 16 << 20},
		{16<<20 + 1, 16<<20 + 1},
	} {
		f := GetFrame(tc.n)
		if len(f) != 0 || cap(f) != tc.wantCap {
			t.Errorf("GetFrame(%d): len %d cap %d, want len 0 cap %d", tc.n, len(f), cap(f), tc.wantCap)
		}
		PutFrame(f)
	}

	// A frame given back keeps no length, and one that outgrew its
	// class (cap no power of two) is not pooled.
	f := append(GetFrame(20<<10), make([]byte, 20<<10)...)
	PutFrame(f)
	if g := GetFrame(20 << 10); len(g) != 0 || cap(g) != 32<<10 {
		t.Errorf("GetFrame after PutFrame: len %d cap %d, want len 0 cap %d", len(g), cap(g), 32<<10)
	}
	grown := append(make([]byte, 0, 32<<10), make([]byte, 40<<10)...)
	PutFrame(grown)
	for range 10 {
		if g := GetFrame(40 << 10); cap(g) != 64<<10 {
			t.Fatalf("GetFrame(40 KiB) after giving back a frame of cap %d: cap %d, want %d", cap(grown), cap(g), 64<<10)
		}
	}
}
