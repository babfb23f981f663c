//! Start at login: whether the system starts Persyk when the user logs in, read from and
//! written to the system itself.
//!
//! Owns the one login item Persyk has: on Linux the XDG autostart entry
//! `$XDG_CONFIG_HOME/autostart/persyk.desktop` (`~/.config` when the variable is unset or
//! not absolute), on macOS `SMAppService.mainApp` (macOS 13+, ServiceManagement).
//!
//! Invariants:
//! - The state shown is the system's, read back every time ([`LoginItem::state`]); Persyk
//!   keeps no flag of its own, so a change made elsewhere (System Settings › General › Login
//!   Items, deleting the file) shows as it is.
//! - An entry that starts something else (another copy of Persyk, an old path) is reported
//!   as [`AutostartState::Elsewhere`] with what it starts, never as "on". Turning start at
//!   login on replaces it; nothing else ever writes or removes it.
//! - Only `persyk.desktop` in the autostart folder is written or removed, and it is written
//!   whole (a temporary file renamed over it), so a reader never sees half an entry.
//! - `Exec=` holds the running executable's absolute path, quoted as the Desktop Entry
//!   Specification says (double quotes; `"`, `` ` ``, `$` and `\` escaped; `%` doubled; the
//!   string escape applied on top), then `--hidden`. A path the format cannot carry (a
//!   line break, not UTF-8) is refused ([`AutostartError::UnrepresentablePath`]), never
//!   written mangled.
//! - Errors carry a stable code ([`AutostartError::code`]) and no user text.
//! - Blocking calls (files, ServiceManagement): the app runs them on the backend, never on
//!   the UI thread.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The entry's file name in the autostart folder.
pub const DESKTOP_FILE: &str = "persyk.desktop";

/// The argument the login item starts Persyk with: in the menu bar, no window.
pub const HIDDEN_ARG: &str = "--hidden";

/// Whether the system starts Persyk at login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutostartState {
    /// Nothing starts Persyk at login (no entry, or one that is turned off).
    Off,
    /// This Persyk starts at login.
    On,
    /// An entry named Persyk's starts another program (`exec`: its command, as written).
    Elsewhere { exec: String },
    /// macOS: registered, but the user has to allow it in System Settings › General › Login
    /// Items before it runs.
    NeedsApproval,
}

impl AutostartState {
    /// Whether this Persyk starts at login (what the checkbox shows).
    pub fn is_on(&self) -> bool {
        matches!(self, AutostartState::On | AutostartState::NeedsApproval)
    }
}

/// Why the login item could not be read or changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutostartError {
    #[error("autostart.io: {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("autostart.no-config-dir: there is no home or config folder to put the entry in")]
    NoConfigDir,
    #[error("autostart.no-executable: the running program's path is unknown")]
    NoExecutable,
    #[error(
        "autostart.unrepresentable-path: the program's path cannot be written in an autostart entry"
    )]
    UnrepresentablePath,
    #[error("autostart.refused: the system refused to change the login item (error {0})")]
    Refused(i64),
    #[error("autostart.unsupported: starting at login is not supported here")]
    Unsupported,
}

impl AutostartError {
    pub fn code(&self) -> &'static str {
        match self {
            AutostartError::Io { .. } => "autostart.io",
            AutostartError::NoConfigDir => "autostart.no-config-dir",
            AutostartError::NoExecutable => "autostart.no-executable",
            AutostartError::UnrepresentablePath => "autostart.unrepresentable-path",
            AutostartError::Refused(_) => "autostart.refused",
            AutostartError::Unsupported => "autostart.unsupported",
        }
    }

    /// What Settings says, in a sentence (the code goes to the details line).
    pub fn sentence(&self) -> &'static str {
        match self {
            AutostartError::Io { .. } => {
                "The login item could not be read or written. Check that the autostart folder \
                 can be written."
            }
            AutostartError::NoConfigDir => {
                "There is no home folder to keep the login item in, so Persyk cannot start at \
                 login."
            }
            AutostartError::NoExecutable => {
                "Persyk could not tell where it is installed, so it cannot start at login."
            }
            AutostartError::UnrepresentablePath => {
                "Persyk is installed at a path a login item cannot hold. Move it to a folder \
                 whose name has no line breaks."
            }
            AutostartError::Refused(_) => {
                "The system refused the login item. Open System Settings › General › Login \
                 Items to check it."
            }
            AutostartError::Unsupported => "Starting at login is not supported on this system.",
        }
    }
}

fn io(op: &'static str) -> impl FnOnce(io::Error) -> AutostartError {
    move |source| AutostartError::Io { op, source }
}

/// Persyk's login item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginItem {
    /// An XDG autostart entry at `path` that starts `exe` (Linux; any Unix in tests).
    Xdg { path: PathBuf, exe: PathBuf },
    /// `SMAppService.mainApp`: the app bundle itself (macOS 13+).
    #[cfg(target_os = "macos")]
    MainApp,
}

impl LoginItem {
    /// This system's login item for the running program.
    #[cfg(target_os = "macos")]
    pub fn system() -> Result<LoginItem, AutostartError> {
        Ok(LoginItem::MainApp)
    }

    /// This system's login item for the running program: the XDG autostart entry in
    /// `$XDG_CONFIG_HOME/autostart` (`~/.config/autostart` when unset) starting
    /// `current_exe()`.
    #[cfg(not(target_os = "macos"))]
    pub fn system() -> Result<LoginItem, AutostartError> {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .filter(|p| p.is_absolute())
            .ok_or(AutostartError::NoConfigDir)?;
        let exe = std::env::current_exe().map_err(|_| AutostartError::NoExecutable)?;
        Ok(LoginItem::xdg(&config.join("autostart"), exe))
    }

    /// The XDG entry `persyk.desktop` in `autostart_dir`, starting `exe`.
    pub fn xdg(autostart_dir: &Path, exe: PathBuf) -> LoginItem {
        LoginItem::Xdg {
            path: autostart_dir.join(DESKTOP_FILE),
            exe,
        }
    }

    /// What the system does at login now (read back each call).
    pub fn state(&self) -> Result<AutostartState, AutostartError> {
        match self {
            LoginItem::Xdg { path, exe } => xdg_state(path, exe),
            #[cfg(target_os = "macos")]
            LoginItem::MainApp => macos::state(),
        }
    }

    /// Turns start at login on or off, then reads the state back.
    pub fn set(&self, on: bool) -> Result<AutostartState, AutostartError> {
        match self {
            LoginItem::Xdg { path, exe } if on => write_entry(path, exe)?,
            LoginItem::Xdg { path, .. } => match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove the autostart entry")(e)),
            },
            #[cfg(target_os = "macos")]
            LoginItem::MainApp => macos::set(on)?,
        }
        self.state()
    }
}

// -------------------------------------------------------------------------------------------
// The XDG autostart entry (Desktop Entry Specification 1.5, Desktop Application Autostart
// Specification 0.5).

/// The entry's text for `exe`.
pub fn desktop_entry(exe: &Path) -> Result<String, AutostartError> {
    let exec = exec_quote(exe)?;
    Ok(format!(
        "[Desktop Entry]\n\
         Type=Application\n\
         Version=1.5\n\
         Name=Persyk\n\
         Comment=Menu-bar dictation\n\
         Exec={exec} {HIDDEN_ARG}\n\
         Terminal=false\n\
         X-GNOME-Autostart-enabled=true\n"
    ))
}

/// `exe` as the first argument of `Exec=`: quoted, with the quoting rule's escapes, then
/// the string type's escape of `\`, and `%` doubled (a field code otherwise).
pub fn exec_quote(exe: &Path) -> Result<String, AutostartError> {
    let text = exe.to_str().ok_or(AutostartError::UnrepresentablePath)?;
    if !exe.is_absolute() || text.chars().any(|c| c.is_control()) {
        return Err(AutostartError::UnrepresentablePath);
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' | '`' | '$' => {
                quoted.push('\\');
                quoted.push(c);
            }
            // Quoting escape (`\\`), then the string escape of each backslash: four.
            '\\' => quoted.push_str("\\\\\\\\"),
            '%' => quoted.push_str("%%"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    Ok(quoted)
}

/// The program an `Exec=` value starts: its first argument, unquoted and unescaped
/// (`None` when the value is malformed).
pub fn exec_program(value: &str) -> Option<String> {
    // The string escapes first (`\\` → `\`, `\s` → space, …), then the quoting.
    let mut unescaped = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                's' => unescaped.push(' '),
                'n' => unescaped.push('\n'),
                't' => unescaped.push('\t'),
                'r' => unescaped.push('\r'),
                '\\' => unescaped.push('\\'),
                other => {
                    unescaped.push('\\');
                    unescaped.push(other);
                }
            }
        } else {
            unescaped.push(c);
        }
    }
    let text = unescaped.trim_start();
    let mut program = String::new();
    if let Some(rest) = text.strip_prefix('"') {
        let mut chars = rest.chars();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => program.push(chars.next()?),
                c => program.push(c),
            }
        }
    } else {
        program.extend(text.chars().take_while(|c| !c.is_whitespace()));
    }
    Some(program.replace("%%", "%"))
}

/// Reads the entry at `path`: off when it is missing, hidden or disabled; on when its
/// program is `exe`; else what it starts.
fn xdg_state(path: &Path, exe: &Path) -> Result<AutostartState, AutostartError> {
    let text = match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(AutostartState::Off),
        Err(e) => return Err(io("read the autostart entry")(e)),
    };
    let mut in_entry = false;
    let mut exec = None;
    let mut enabled = true;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_entry = line == "[Desktop Entry]";
            continue;
        }
        if !in_entry {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match (key.trim(), value.trim()) {
            ("Exec", v) => exec = Some(v.to_owned()),
            // "Hidden=true" means the entry is deleted; GNOME's switch turns it off.
            ("Hidden", "true") | ("X-GNOME-Autostart-enabled", "false") => enabled = false,
            _ => {}
        }
    }
    let Some(exec) = exec.filter(|_| enabled) else {
        return Ok(AutostartState::Off);
    };
    match exec_program(&exec) {
        Some(program) if Path::new(&program) == exe => Ok(AutostartState::On),
        _ => Ok(AutostartState::Elsewhere { exec }),
    }
}

/// Writes the entry whole: a temporary file beside it, renamed over it.
fn write_entry(path: &Path, exe: &Path) -> Result<(), AutostartError> {
    let text = desktop_entry(exe)?;
    let dir = path.parent().ok_or(AutostartError::NoConfigDir)?;
    fs::create_dir_all(dir).map_err(io("create the autostart folder"))?;
    let tmp = dir.join(format!(".{DESKTOP_FILE}.tmp"));
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(io("write the autostart entry"))
}

// -------------------------------------------------------------------------------------------
// macOS: SMAppService.mainApp.

#[cfg(target_os = "macos")]
mod macos {
    use objc2_service_management::{SMAppService, SMAppServiceStatus};

    use super::{AutostartError, AutostartState};

    /// `SMAppService` exists from macOS 13 on; Persyk runs on 11 and later.
    fn supported() -> Result<(), AutostartError> {
        if objc2::available!(macos = 13.0) {
            Ok(())
        } else {
            Err(AutostartError::Unsupported)
        }
    }

    pub(super) fn state() -> Result<AutostartState, AutostartError> {
        supported()?;
        // SAFETY: macOS 13+ (checked above); `mainAppService` and `status` take no
        // arguments and may be called from any thread.
        let status = unsafe { SMAppService::mainAppService().status() };
        Ok(match status {
            SMAppServiceStatus::Enabled => AutostartState::On,
            SMAppServiceStatus::RequiresApproval => AutostartState::NeedsApproval,
            // Not registered, or not found (a bare binary outside an app bundle).
            _ => AutostartState::Off,
        })
    }

    pub(super) fn set(on: bool) -> Result<(), AutostartError> {
        supported()?;
        // SAFETY: as above; a failure is an `NSError`, read only for its code.
        let result = unsafe {
            let service = SMAppService::mainAppService();
            if on {
                service.registerAndReturnError()
            } else {
                service.unregisterAndReturnError()
            }
        };
        result.map_err(|e| AutostartError::Refused(e.code() as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exec_path_is_quoted_and_read_back() {
        for path in [
            "/usr/bin/persyk",
            "/home/me/My Apps/persyk",
            "/opt/we\"ird/$HOME/`x`/100%/back\\slash/persyk",
        ] {
            let quoted = exec_quote(Path::new(path)).unwrap();
            assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{quoted}");
            assert_eq!(
                exec_program(&format!("{quoted} --hidden")).as_deref(),
                Some(path)
            );
        }
        assert_eq!(
            exec_quote(Path::new("/a/100%/b\\c")).unwrap(),
            "\"/a/100%%/b\\\\\\\\c\""
        );
        assert_eq!(
            exec_program("/usr/bin/other --x").as_deref(),
            Some("/usr/bin/other")
        );
        assert_eq!(exec_program("\"/unterminated"), None);
    }

    #[test]
    fn a_path_the_format_cannot_carry_is_refused() {
        for path in ["/a/line\nbreak/persyk", "relative/persyk"] {
            let e = exec_quote(Path::new(path)).unwrap_err();
            assert_eq!(e.code(), "autostart.unrepresentable-path");
        }
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"/a/\xff/persyk"));
        assert_eq!(
            exec_quote(not_utf8).unwrap_err().code(),
            "autostart.unrepresentable-path"
        );
    }

    #[test]
    fn the_entry_is_created_read_back_as_on_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let autostart = dir.path().join("config/autostart");
        let exe = PathBuf::from("/opt/Persyk Apps/persyk");
        let item = LoginItem::xdg(&autostart, exe.clone());
        assert_eq!(item.state().unwrap(), AutostartState::Off);
        assert_eq!(item.set(true).unwrap(), AutostartState::On);
        let text = fs::read_to_string(autostart.join(DESKTOP_FILE)).unwrap();
        assert!(
            text.starts_with("[Desktop Entry]\nType=Application\n"),
            "{text}"
        );
        assert!(
            text.contains("\nExec=\"/opt/Persyk Apps/persyk\" --hidden\n"),
            "{text}"
        );
        // Read back from the file each time, not remembered.
        assert_eq!(item.state().unwrap(), AutostartState::On);
        // Turning it on again rewrites the same entry.
        assert_eq!(item.set(true).unwrap(), AutostartState::On);
        assert_eq!(item.set(false).unwrap(), AutostartState::Off);
        assert!(!autostart.join(DESKTOP_FILE).exists());
        // Off when already off is fine; no temporary file is left behind.
        assert_eq!(item.set(false).unwrap(), AutostartState::Off);
        assert_eq!(fs::read_dir(&autostart).unwrap().count(), 0);
    }

    #[test]
    fn an_entry_that_starts_something_else_is_reported_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let item = LoginItem::xdg(dir.path(), PathBuf::from("/home/me/bin/persyk"));
        let path = dir.path().join(DESKTOP_FILE);
        fs::write(
            &path,
            "[Desktop Entry]\nType=Application\nName=Persyk\nExec=/usr/bin/persyk --hidden\n",
        )
        .unwrap();
        assert_eq!(
            item.state().unwrap(),
            AutostartState::Elsewhere {
                exec: "/usr/bin/persyk --hidden".into()
            }
        );
        assert!(!item.state().unwrap().is_on());
        // Turned off by the desktop (GNOME's switch) or hidden: off, whatever it starts.
        fs::write(
            &path,
            "[Desktop Entry]\nExec=/home/me/bin/persyk\nX-GNOME-Autostart-enabled=false\n",
        )
        .unwrap();
        assert_eq!(item.state().unwrap(), AutostartState::Off);
        fs::write(
            &path,
            "[Desktop Entry]\nExec=/home/me/bin/persyk\nHidden=true\n",
        )
        .unwrap();
        assert_eq!(item.state().unwrap(), AutostartState::Off);
        // An Exec in another group is not the entry's; without one it starts nothing.
        fs::write(
            &path,
            "[Desktop Action x]\nExec=/home/me/bin/persyk\n[Desktop Entry]\nName=Persyk\n",
        )
        .unwrap();
        assert_eq!(item.state().unwrap(), AutostartState::Off);
        // Written by hand, unquoted, pointing at this program: on.
        fs::write(&path, "[Desktop Entry]\nExec=/home/me/bin/persyk\n").unwrap();
        assert_eq!(item.state().unwrap(), AutostartState::On);
        // Turning it on replaces another program's entry with this one's.
        fs::write(&path, "[Desktop Entry]\nExec=/usr/bin/persyk\n").unwrap();
        assert_eq!(item.set(true).unwrap(), AutostartState::On);
    }

    #[test]
    fn errors_have_stable_codes_and_sentences() {
        let dir = tempfile::tempdir().unwrap();
        // The autostart "folder" is a file: nothing can be written under it.
        let blocker = dir.path().join("autostart");
        fs::write(&blocker, "").unwrap();
        let item = LoginItem::xdg(&blocker, PathBuf::from("/usr/bin/persyk"));
        let e = item.set(true).unwrap_err();
        assert_eq!(e.code(), "autostart.io");
        assert!(!e.sentence().is_empty());
        let item = LoginItem::xdg(dir.path(), PathBuf::from("/a/line\nbreak"));
        assert_eq!(
            item.set(true).unwrap_err().code(),
            "autostart.unrepresentable-path"
        );
        assert!(!dir.path().join(DESKTOP_FILE).exists());
    }
}
