package console

import "embed"

// assets are the console's pages, scripts and styles, and the front-end
// library they use (static/vendor), served as they are.
//
//go:embed static
var assets embed.FS
