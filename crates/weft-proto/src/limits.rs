//! Every bound of the protocol in one place, the unit last in each name.

/// Largest message part of a frame (requests and replies without bulk).
pub const MESSAGE_BYTES_MAX: u32 = 4 * 1024 * 1024;
/// Largest bulk part of a frame (one read or write to one object).
pub const BULK_BYTES_MAX: u32 = 16 * 1024 * 1024;
/// A bulk of at least BULK_ALIGNED_FROM_BYTES is received at an address that is a multiple
/// of this (a page), so that a server may hand it to direct I/O as it is.
pub const BULK_ALIGN_BYTES: usize = 4096;
/// Bulks from this size on are received aligned (BULK_ALIGN_BYTES); smaller ones are not
/// worth the padding.
pub const BULK_ALIGNED_FROM_BYTES: usize = 64 * 1024;
/// Largest name of a directory entry (as POSIX NAME_MAX).
pub const NAME_BYTES_MAX: usize = 255;
/// Largest symlink target (as PATH_MAX).
pub const SYMLINK_BYTES_MAX: usize = 4096;
/// Largest extended attribute value (as Linux XATTR_SIZE_MAX).
pub const XATTR_VALUE_BYTES_MAX: usize = 64 * 1024;
/// Largest extended attribute name.
pub const XATTR_NAME_BYTES_MAX: usize = 255;
/// Stripe sizes are multiples of this (as Lustre's LOV_MIN_STRIPE_SIZE).
pub const STRIPE_SIZE_UNIT_BYTES: u64 = 64 * 1024;
/// The stripe size used when none is asked for.
pub const STRIPE_SIZE_DEFAULT_BYTES: u64 = 1024 * 1024;
/// Largest stripe size (as Lustre: 4 GiB minus one unit).
pub const STRIPE_SIZE_MAX_BYTES: u64 = (4 << 30) - STRIPE_SIZE_UNIT_BYTES;
/// Stripe count used when none is asked for.
pub const STRIPE_COUNT_DEFAULT: u32 = 1;
/// Largest stripe count of one file.
pub const STRIPE_COUNT_MAX: u32 = 2000;
/// Most components of one layout (progressive layouts and mirrors together).
pub const LAYOUT_COMPONENTS_MAX: usize = 64;
/// Most mirrors of one file (Lustre's LUSTRE_MIRROR_COUNT_MAX).
pub const MIRRORS_MAX: usize = 16;
/// Largest data-on-MDT component: its end (Lustre's `dom_stripesize` default, 1 MiB).
pub const DOM_SIZE_MAX_BYTES: u64 = 1024 * 1024;
/// Data-on-MDT objects live on a hidden object target of the MDT's server, index
/// `DOM_TARGET_BASE + MDT index`; OST indices stay below it.
pub const DOM_TARGET_BASE: u32 = 0xFFFF_0000;
/// Most directory entries returned by one readdir request.
pub const READDIR_ENTRIES_MAX: u32 = 1024;
/// Most requests in flight on one client connection.
pub const CONNECTION_IN_FLIGHT_MAX: usize = 256;
/// Largest file size (as Lustre's on 64-bit: 2^63 - 1, less one stripe unit); a file's
/// own limit follows from its layout (`Layout::size_max`).
pub const FILE_SIZE_MAX_BYTES: u64 = i64::MAX as u64;
/// Largest object an OST keeps: ext4's largest file with 4 KiB blocks, 2^32 - 1 blocks, the
/// smallest among the file systems an OST's directory may be on. Every OST refuses past it
/// whatever its store, so a file's largest size follows from its layout alone, as Lustre's
/// `maxbytes` (the OSTs' smallest limit times the stripe count).
pub const OBJECT_SIZE_MAX_BYTES: u64 = u32::MAX as u64 * 4096;
/// Largest single read or write request the client library sends to one object.
pub const RPC_BULK_BYTES_MAX: u32 = 4 * 1024 * 1024;
/// Most changelog records one `ChangelogRead` answers: the MDT clamps a larger ask to it,
/// and readers (the CLI's `changelog`, the policy engine) ask for this many at a time.
pub const CHANGELOG_READ_RECORDS_MAX: u32 = 4096;
/// Longest message a copytool reports with a failed HSM action (what `hsm action` shows):
/// enough for a program's last lines of standard error. A longer one is cut, keeping its
/// beginning and its end ([`cut_message`]), never refused (a refused report would be
/// retried until the action times out).
pub const HSM_MESSAGE_BYTES_MAX: usize = 4096;

/// `message` cut to at most `max` bytes: its beginning and its end around " ... ", at
/// character boundaries (the beginning usually says what failed, the end why).
pub fn cut_message(message: &str, max: usize) -> String {
    const GAP: &str = " ... ";
    if message.len() <= max {
        return message.to_string();
    }
    if max <= GAP.len() {
        return GAP[..max].to_string();
    }
    let keep = max - GAP.len();
    let mut head = keep / 2;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - (keep - head);
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}{GAP}{}", &message[..head], &message[tail..])
}

/// Most ops in one MDT `Batch` (the metadata write-back cache): 1024 creates of 255-byte
/// names encode to about 300 KiB, and journal to about 1.2 MiB on the MDT (one entry of a
/// replicated MDT's log, which must fit in a message).
pub const BATCH_OPS_MAX: usize = 1024;
/// Most FIDs one MDT `WbcGrant` hands out (the client asks again when it used them).
pub const WBC_FIDS_PER_GRANT_MAX: u32 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_keeps_its_beginning_and_end() {
        assert_eq!(cut_message("short", 10), "short");
        let long = format!("archive of f failed: {}the disk is full", "x".repeat(10_000));
        let cut = cut_message(&long, HSM_MESSAGE_BYTES_MAX);
        assert_eq!(cut.len(), HSM_MESSAGE_BYTES_MAX);
        assert!(cut.starts_with("archive of f failed: ") && cut.ends_with("the disk is full"), "{cut}");
        assert!(cut.contains(" ... "));
        // Never inside a character: é is two bytes.
        let accents = "é".repeat(100);
        let cut = cut_message(&accents, 50);
        assert!(cut.len() <= 50 && cut.starts_with('é') && cut.ends_with('é'), "{cut}");
        assert_eq!(cut_message(&accents, 3), " ..");
    }
}
