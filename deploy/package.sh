#!/usr/bin/env bash
# Builds the two Debian packages for this machine's architecture (dpkg --print-architecture):
# the vehicle's, dist/fleetcast_<version>_<arch>.deb, and the fleet side's,
# dist/fleetcast-fleet_<version>_<arch>.deb (below).
#
# fleetcast: fleetcast-agent, the vehicle's software, a release build with the
# Swift standard library and FoundationEssentials linked statically (no full Foundation, no ICU)
# and stripped, the hardened systemd unit, /etc/fleetcast/agent.yaml as a conffile, the udev
# rule and the maintainer scripts that make the user fleetcast. The package needs only Debian's
# own libraries, named in Depends: from the binary's real needs (dpkg-shlibdeps). Build the
# arm64 package on an arm64 machine (Raspberry Pi, Jetson) with this same script: the Swift
# toolchain is needed on the build machine only.
#
# fleetcast-fleet: fleet-watch, the fleet side (watch, the live map, the recorder into PostgreSQL,
# the Home Assistant and OwnTracks bridges), built in the same scratch folder with the same flags
# (the dependencies both share are compiled once); it links full Foundation, which the machines
# that watch the fleet can spare, statically with the Swift standard library. Its systemd units
# (fleet-watch-record, fleet-watch-serve, fleet-watch-bridge@), their settings in /etc/fleetcast as
# conffiles, and the maintainer scripts that make the user fleet-watch. Depends: from
# dpkg-shlibdeps, plus libjs-leaflet (the map's Leaflet).
#
# Needs the Swift toolchain, dpkg-dev (dpkg-shlibdeps) and the -dev packages the build needs
# (libmosquitto-dev, libyaml-dev, pkg-config). Prints the two packages' paths last, one a line:
# the vehicle's, then the fleet side's.
# FLEETCAST_DEB_SCRATCH: the build folder (default .build-deb; kept, so a rebuild is quick).
# FLEETCAST_DEB_LINK_FROM=DIR: nothing is built here; both programs are linked from the objects of
# the debug build in DIR (.build/debug), statically with the Swift standard library (and
# FoundationEssentials, or Foundation) as above, with the same linker flags (deploy/test.sh: its
# tests need that build anyway, and a second, optimised compile cost about 1,250 processor-s, two
# fifths of the test command; the packages it tests are then made as this script makes them,
# around binaries that are not optimised).
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=${FLEETCAST_DEB_SCRATCH:-.build-deb}
arch=$(dpkg --print-architecture)
# Linked by lld (the toolchain's own) for two things that keep the binary's pages out of memory:
# relative relocations packed (DT_RELR, glibc >= 2.36: Debian 12, Raspberry Pi OS 12), so the
# loader reads 20 KB of them instead of 2.4 MB; and no symbol exported (--no-export-dynamic
# after the static standard library's -export-dynamic), so 22,000 Swift symbols are not
# looked up by the loader. Together 3.7 MB less resident at 10 Hz (fleetcast-bench footprint).
# No debug information for the Swift code (-gnone, after the package manager's -g): the
# binaries are stripped below, so it would only be compiled, linked and thrown away (measured:
# fleet-watch 121 MB unstripped instead of 165 MB). The C and C++ of the dependencies keep
# theirs: the package manager puts its own -g after any -Xcc flag.
link_flags=(-Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
            -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic)
build=(swift build -c release --static-swift-stdlib --scratch-path "$scratch" -Xswiftc -use-ld=lld
       -Xswiftc -gnone "${link_flags[@]}")
link_from=${FLEETCAST_DEB_LINK_FROM:-}

if [ -z "$link_from" ]; then
  echo "==> building fleetcast-agent (release, static Swift stdlib and FoundationEssentials)" >&2
  "${build[@]}" --product fleetcast-agent >&2
  echo "==> building fleet-watch (release, static Swift stdlib and Foundation)" >&2
  "${build[@]}" --product fleet-watch >&2
fi

# The programs linked from a debug build's objects (FLEETCAST_DEB_LINK_FROM): the link the package
# manager makes for each, with -static-stdlib. The objects were compiled against the shared
# Foundation's modules, which name no static library to link, so the static ones are named here
# (what their own modules name when compiled with --static-swift-stdlib; a toolchain that splits
# Foundation otherwise fails this link with the missing symbols named). The other libraries are
# those the package manager's own link names: libmosquitto and libyaml from pkg-config, and
# libstdc++ for fleet-watch (BoringSSL is C++).
# link_static PRODUCT LIBRARY...: $bin/PRODUCT from $link_from's objects.
link_static() {
  local product=$1; shift
  local objects=$link_from/$product.product/Objects.LinkFileList module=${product//-/_}
  if [ ! -s "$objects" ]; then
    echo "package.sh: no $objects (FLEETCAST_DEB_LINK_FROM: a build folder that built $product)" >&2
    exit 1
  fi
  echo "==> linking $product from $link_from's objects (static Swift stdlib)" >&2
  swiftc -static-stdlib -emit-executable -module-name "$module" -o "$bin/$product" "@$objects" \
    -L "$link_from" -use-ld=lld -Xlinker --gc-sections -Xlinker --defsym -Xlinker "main=${module}_main" \
    "${link_flags[@]}" "$@" -lswiftDispatch -ldispatch -lBlocksRuntime
}
if [ -n "$link_from" ]; then
  bin=$scratch/linked
  mkdir -p "$bin"
  link_static fleetcast-agent -lyaml -lmosquitto -lFoundationEssentials -l_FoundationCShims -l_FoundationCollections
  link_static fleet-watch -lmosquitto -lstdc++ -lFoundation -lFoundationInternationalization -lFoundationEssentials -l_FoundationICU \
    -l_FoundationCShims -l_FoundationCollections -lCoreFoundation
else
  bin=$("${build[@]}" --show-bin-path)
fi
fleet_watch=$bin/fleet-watch

# Full Foundation (and ICU, its tens of MB) must stay out of the vehicle's binary: the agent
# and its dependencies use FoundationEssentials only. A new `import Foundation` brings it back.
# (nm's whole output read first: `nm | grep -q` under pipefail would fail on grep's early exit.)
symbols=$(nm "$bin/fleetcast-agent")
if grep -q -e '\$s10Foundation' -e ' ucol_open' <<<"$symbols"; then
  echo "package.sh: fleetcast-agent links full Foundation or ICU; import FoundationEssentials instead" >&2
  exit 1
fi

# The one version: the agent's own (FleetcastAgent.version, what `--version` and the status say).
version=$("$bin/fleetcast-agent" --version)
if ! [[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
  echo "package.sh: '$version' (fleetcast-agent --version) is not a Debian upstream version" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/DEBIAN"

echo "==> staging fleetcast and fleetcast-fleet $version for $arch" >&2
install -D -m 0755 "$bin/fleetcast-agent" "$root/usr/bin/fleetcast-agent"
# As dh_strip does for executables: symbols, .comment and .note go.
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  "$root/usr/bin/fleetcast-agent"

fleet=$work/fleet
mkdir -p "$fleet/DEBIAN"
install -D -m 0755 "$fleet_watch" "$fleet/usr/bin/fleet-watch"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$fleet/usr/bin/fleet-watch"

# No Swift or Foundation library may be needed at run time: neither a vehicle nor the fleet's
# machines have the Swift toolchain.
for binary in "$root/usr/bin/fleetcast-agent" "$fleet/usr/bin/fleet-watch"; do
  libs=$(ldd "$binary")
  if grep -E 'libswift|libFoundation|lib_Foundation|libicu|libdispatch|libBlocksRuntime|libXCTest|libTesting' <<<"$libs" >&2; then
    echo "package.sh: ${binary##*/} needs the Swift libraries above at run time (is --static-swift-stdlib in effect?)" >&2
    exit 1
  fi
  if grep 'not found' <<<"$libs" >&2; then
    echo "package.sh: ${binary##*/} needs libraries this machine does not have" >&2
    exit 1
  fi
done

# bookworm's layout (debhelper's): units and udev rules under /lib; /usr/lib is the same
# directory on every merged-/usr system.
install -D -m 0644 deploy/fleetcast-agent.service "$root/lib/systemd/system/fleetcast-agent.service"
install -D -m 0644 deploy/60-fleetcast-gnss.rules "$root/lib/udev/rules.d/60-fleetcast-gnss.rules"
install -D -m 0644 config/agent.yaml "$root/etc/fleetcast/agent.yaml"
echo /etc/fleetcast/agent.yaml >"$root/DEBIAN/conffiles"

# The changelog (changelog.gz: the version has no Debian revision, so these are native packages,
# made by the project itself) is made from the one version and the commit it was built from; its date (and
# every file's time in the packages) is the commit's, so a rebuild of a commit is the same package.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer="Fleetcast maintainers <maintainers@users.noreply.a-seed-36ca9361.example>"

docs() {  # ROOT PACKAGE: copyright, README, changelog, lintian overrides
  local doc=$1/usr/share/doc/$2
  install -D -m 0644 deploy/deb/copyright "$doc/copyright"
  install -m 0644 README.md "$doc/README.md"
  gzip -9n "$doc/README.md"
  if [ -s "deploy/deb/lintian-overrides-$2" ]; then
    install -D -m 0644 "deploy/deb/lintian-overrides-$2" "$1/usr/share/lintian/overrides/$2"
  fi
  {
    echo "$2 ($version) unstable; urgency=medium"
    echo
    echo "  * Built by deploy/package.sh from commit $commit."
    echo "  * The project's history is its git log."
    echo
    echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
  } >"$doc/changelog"
  gzip -9n "$doc/changelog"
}

# Depends: from what a binary really loads, as dh_shlibdeps finds it (the shlibs and symbols
# files of the packages that ship those libraries).
mkdir -p "$work/src/debian"
printf 'Source: fleetcast\n\nPackage: fleetcast\nArchitecture: any\n' >"$work/src/debian/control"
shlibs_of() {  # BINARY
  local shlibs libc
  shlibs=$(cd "$work/src" && dpkg-shlibdeps -O -e"$1")
  shlibs=${shlibs#shlibs:Depends=}
  # Packed relocations need glibc 2.36's loader (the binary asks for GLIBC_ABI_DT_RELR, a version
  # without symbols, which dpkg-shlibdeps does not see): say so, or an older glibc's apt would
  # install a binary its loader refuses.
  if grep -q GLIBC_ABI_DT_RELR <<<"$(readelf -V "$1")"; then
    libc=$(sed -nE 's/.*libc6 \(>= ([^)]*)\).*/\1/p' <<<"$shlibs")
    if dpkg --compare-versions "${libc:-0}" lt 2.36; then
      shlibs=$(sed -E 's/libc6 \(>= [^)]*\)/libc6 (>= 2.36)/' <<<"$shlibs")
    fi
  fi
  echo "$shlibs"
}

# ROOT PACKAGE, the control file on stdin (@INSTALLED_SIZE@ filled in here): md5sums, control,
# every file's time the commit's, owners root:root (--root-owner-group); prints the .deb's path.
build_deb() {
  local root=$1 package=$2 control deb
  control=$(cat)
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
  sed "s/@INSTALLED_SIZE@/$(du -sk --exclude=DEBIAN "$root" | cut -f1)/" <<<"$control" >"$root/DEBIAN/control"
  find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  mkdir -p dist
  deb=dist/${package}_${version}_${arch}.deb
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
  echo "==> $(du -h "$deb" | cut -f1) $deb" >&2
  echo "$deb"
}

docs "$root" fleetcast
install -m 0755 deploy/deb/postinst deploy/deb/prerm deploy/deb/postrm "$root/DEBIAN/"
# adduser: for postinst.
build_deb "$root" fleetcast <<EOF
Package: fleetcast
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: @INSTALLED_SIZE@
Depends: adduser, $(shlibs_of "$root/usr/bin/fleetcast-agent")
Suggests: gpsd, mosquitto-clients
Section: net
Priority: optional
Description: GNSS fixes of a vehicle to MQTT
 fleetcast-agent runs on a vehicle's single-board computer: it reads the GNSS
 receiver through gpsd or straight from a serial port (NMEA 0183) and publishes
 fixes and headings to an MQTT broker, keeping what the broker has not
 acknowledged in an outbox on disk. It runs as the systemd service
 fleetcast-agent, hardened and supervised by a watchdog; a udev rule names
 common USB receivers /dev/gnss0.
EOF

echo "==> staging fleetcast-fleet $version for $arch" >&2
for unit in fleet-watch-record.service fleet-watch-serve.service fleet-watch-bridge@.service; do
  install -D -m 0644 "deploy/fleet/$unit" "$fleet/lib/systemd/system/$unit"
done
for conf in fleet-watch-record.conf fleet-watch-serve.conf fleet-watch-bridge-homeassistant.conf fleet-watch-bridge-owntracks.conf; do
  install -D -m 0644 "deploy/fleet/$conf" "$fleet/etc/fleetcast/$conf"
  echo "/etc/fleetcast/$conf" >>"$fleet/DEBIAN/conffiles"
done
docs "$fleet" fleetcast-fleet
install -m 0755 deploy/fleet/postinst deploy/fleet/prerm deploy/fleet/postrm "$fleet/DEBIAN/"
# adduser: for postinst; libjs-leaflet: the map page's Leaflet, served from /usr/share/javascript/leaflet.
build_deb "$fleet" fleetcast-fleet <<EOF
Package: fleetcast-fleet
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: @INSTALLED_SIZE@
Depends: adduser, libjs-leaflet, $(shlibs_of "$fleet/usr/bin/fleet-watch")
Suggests: mosquitto, mosquitto-clients, postgresql
Section: net
Priority: optional
Description: Fleetcast's fleet side: vehicles live, on a map, recorded
 fleet-watch subscribes to the MQTT topics that Fleetcast agents publish (the
 fleetcast package, on the vehicles) and shows the fleet live in a terminal,
 serves it on a live map to web browsers, records its tracks into PostgreSQL
 and writes them out as GeoJSON, GPX or CSV, and republishes it for Home
 Assistant and OwnTracks. The map server, the recorder and the bridges run as
 the systemd services fleet-watch-serve, fleet-watch-record and
 fleet-watch-bridge@homeassistant or @owntracks, hardened and supervised by a
 watchdog.
EOF
