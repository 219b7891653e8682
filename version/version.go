// Package version says which build of Grackle this is. Version and
// Revision are stamped at build time with -ldflags (make build and the
// image do it); a binary built without them falls back to what the Go
// toolchain recorded (the module version, and vcs.revision when built
// from a git checkout with VCS stamping on).
package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Stamped with -ldflags "-X github.com/grackle-coord/grackle/version.version=..."
// (unexported so that nothing can change them at run time).
var (
	version  string
	revision string
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's build information. Fields that are unknown
// read "unknown", never "".
func Get() Info {
	once.Do(func() {
		info = Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
		if bi, ok := debug.ReadBuildInfo(); ok {
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && info.Revision == "" {
					info.Revision = s.Value
				}
			}
		}
		if info.Version == "" {
			info.Version = "unknown"
		}
		if info.Revision == "" {
			info.Revision = "unknown"
		}
	})
	return info
}

// String is the one-line form: "grackle 0.3.0 (revision abc123, go1.26.8)".
func (i Info) String() string {
	return "grackle " + i.Version + " (revision " + i.Revision + ", " + i.GoVersion + ")"
}
