//! Files read or written whole: inputs are opened only when they are regular files (a device
//! such as `/dev/zero`, a FIFO or a directory would be read forever, block, or fail obscurely),
//! and outputs are written atomically (a temporary file beside the target, synced, then renamed
//! over it), never over anything but a regular file (`--out /dev/full` must not replace the
//! device node).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What a path that is not a regular file is, for messages.
fn kind_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The error for a path that is not a regular file.
fn not_regular(meta: &fs::Metadata) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}, not a regular file", kind_of(meta)),
    )
}

/// Opens `path` for reading if it is a regular file (symbolic links followed).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

/// The whole text of the regular file `path` (see [`open_regular`]).
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open_regular(path)?, &mut text)?;
    Ok(text)
}

/// Where a write to `path` lands: `path` itself, or, for a symbolic link, the file it names.
/// An error if that exists and is not a regular file.
fn destination(path: &Path) -> io::Result<PathBuf> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(not_regular(&meta)),
        Ok(_) if fs::symlink_metadata(path)?.file_type().is_symlink() => fs::canonicalize(path),
        Ok(_) => Ok(path.to_path_buf()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(e) => Err(e),
    }
}

/// An error if `path` exists and is not a regular file, so that a command refuses an output
/// it could never write before it does its work.
pub fn check_replaceable(path: &Path) -> io::Result<()> {
    destination(path).map(|_| ())
}

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new one, never a
/// part, and a crash leaves at most a hidden temporary file beside it. An error (nothing
/// written) if `path` exists and is not a regular file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = destination(path)?;
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let tmp = target.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, &target)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_not_opened() {
        for p in ["/dev/zero", "/dev/null", "/tmp"] {
            let e = open_regular(Path::new(p)).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{p}: {e}");
        }
    }

    #[test]
    fn an_atomic_write_replaces_a_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_atomic_write_through_a_link_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"new");
    }

    #[test]
    fn an_atomic_write_never_replaces_a_device_or_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        for p in [Path::new("/dev/null"), dir.path()] {
            let e = write_atomic(p, b"x").unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        assert!(!fs::metadata("/dev/null").unwrap().file_type().is_file());
    }
}
