package tsplit

import (
	"runtime/debug"
	"strings"
)

// modulePath is this module's import path, to find its version when it
// is a dependency of another program.
const modulePath = "github.com/tsplit/tsplit"

// Version is this module's version as the Go toolchain recorded it in
// the running binary: the module version ("(devel)" for a build in a
// checkout, a tag or pseudo-version otherwise), then, when the binary
// was built in a checkout, the VCS revision, its commit time and
// "+dirty" for uncommitted changes, then the Go version. "unknown" when
// the binary carries no build information.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	version := ""
	if strings.HasPrefix(bi.Main.Path, modulePath) {
		version = bi.Main.Version
	} else {
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				version = d.Version
				if d.Replace != nil {
					version += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		version += " " + settings["vcs"] + " " + rev
		if t := settings["vcs.time"]; t != "" {
			version += " " + t
		}
		if settings["vcs.modified"] == "true" {
			version += " +dirty"
		}
	}
	return strings.TrimSpace(version + " " + bi.GoVersion)
}
