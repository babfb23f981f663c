# Homebrew cask for Persyk: a template. scripts/fill-cask fills in the version, the DMG's
# SHA-256 and the repository from a release (see packaging/README.md) and replaces this
# comment; the filled file goes to a tap as Casks/persyk.rb.
cask "persyk" do
  version "@VERSION@"
  sha256 "@SHA256@"

  url "https://github.com/@REPOSITORY@/releases/download/v#{version}/Persyk-#{version}.dmg"
  name "Persyk"
  desc "Menu-bar dictation that keeps every word as plain files"
  homepage "https://github.com/@REPOSITORY@"

  depends_on macos: ">= :big_sur"

  app "Persyk.app"
  binary "#{appdir}/Persyk.app/Contents/MacOS/persyk"

  uninstall quit: "app.persyk.Persyk"

  # Settings, caches and the app's preferences. The sessions under ~/Documents/persyk are the
  # user's own files and are never removed.
  zap trash: [
    "~/Library/Application Support/app.persyk.Persyk",
    "~/Library/Caches/app.persyk.Persyk",
    "~/Library/Preferences/app.persyk.Persyk.plist",
  ]
end
