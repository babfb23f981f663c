//! The general pasteboard for a paste on macOS: saves every type of every item, offers the
//! transcript as an item whose text comes from a data provider (so Persyk sees the paste
//! read it), and writes the saved items back.
//!
//! Invariants:
//! - A save is whole or it is [`Previous::Unrestorable`]: a type whose data cannot be read
//!   (a promise its owner no longer keeps), or more than [`MAX_SAVED_BYTES`], make the save
//!   unrestorable, so nothing half is put back.
//! - Only the provider's call *after* [`PasteClipboard::expect_paste`] counts as the paste's
//!   read; the put-back happens only while the pasteboard's change count is still the one
//!   the transcript got (nobody copied since).
//! - The transcript's item is written on the main thread, whose run loop AppKit asks the
//!   provider from, and its provider lives (in a main-thread slot) until the next transcript
//!   replaces it: a provider that is gone would leave an item without text.
//! - macOS only; `scripts/check-macos` type-checks it.

use std::cell::RefCell;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use objc2::rc::Retained;
use objc2::runtime::{NSObject, NSObjectProtocol, ProtocolObject};
use objc2::{AllocAnyThread, DefinedClass, define_class, msg_send};
use objc2_app_kit::{
    NSPasteboard, NSPasteboardItem, NSPasteboardItemDataProvider, NSPasteboardType,
    NSPasteboardTypeString, NSPasteboardWriting,
};
use objc2_foundation::{NSArray, NSData, NSInteger, NSString};

use super::{PasteClipboard, Previous, SavedClipboard, SavedFormat};

/// At most this much saved content (bytes, all items together); more is unrestorable.
const MAX_SAVED_BYTES: usize = 64 << 20;

struct ProviderIvars {
    text: String,
    read: SyncSender<()>,
}

define_class!(
    /// Gives the transcript's text to whoever reads the pasteboard item, and says it did.
    #[unsafe(super(NSObject))]
    #[name = "PersykTranscriptProvider"]
    #[ivars = ProviderIvars]
    struct TranscriptProvider;

    unsafe impl NSObjectProtocol for TranscriptProvider {}

    unsafe impl NSPasteboardItemDataProvider for TranscriptProvider {
        #[unsafe(method(pasteboard:item:provideDataForType:))]
        fn provide_data(
            &self,
            _pasteboard: Option<&NSPasteboard>,
            item: &NSPasteboardItem,
            kind: &NSPasteboardType,
        ) {
            item.setString_forType(&NSString::from_str(&self.ivars().text), kind);
            let _ = self.ivars().read.try_send(());
        }
    }
);

impl TranscriptProvider {
    fn new(text: &str, read: SyncSender<()>) -> Retained<TranscriptProvider> {
        let this = TranscriptProvider::alloc().set_ivars(ProviderIvars {
            text: text.to_owned(),
            read,
        });
        // SAFETY: NSObject's designated initializer on a freshly allocated object.
        unsafe { msg_send![super(this), init] }
    }
}

thread_local! {
    /// The provider of the transcript last offered (only ever touched on the main thread).
    static PROVIDER: RefCell<Option<Retained<TranscriptProvider>>> = const { RefCell::new(None) };
}

/// The general pasteboard, as one paste uses it.
#[derive(Default)]
pub struct MacPasteboard {
    /// The change count the transcript's item got.
    change: Option<NSInteger>,
    read: Option<Receiver<()>>,
}

impl MacPasteboard {
    fn still_ours(&self) -> bool {
        self.change == Some(NSPasteboard::generalPasteboard().changeCount())
    }
}

impl PasteClipboard for MacPasteboard {
    fn save(&mut self) -> Previous {
        let pasteboard = NSPasteboard::generalPasteboard();
        let Some(items) = pasteboard.pasteboardItems() else {
            return Previous::Unrestorable;
        };
        let mut saved = SavedClipboard::default();
        let mut total = 0usize;
        for (index, item) in items.iter().enumerate() {
            for kind in item.types().iter() {
                let Some(data) = item.dataForType(&kind) else {
                    return Previous::Unrestorable;
                };
                let data = data.to_vec();
                total += data.len();
                if total > MAX_SAVED_BYTES {
                    return Previous::Unrestorable;
                }
                saved.formats.push(SavedFormat {
                    item: index,
                    name: kind.to_string(),
                    encoding: (String::new(), 8),
                    data,
                });
            }
        }
        if saved.formats.is_empty() {
            Previous::Empty
        } else {
            Previous::Saved(saved)
        }
    }

    fn offer(&mut self, text: &str) -> Result<(), String> {
        let (tx, rx) = sync_channel(4);
        let text = text.to_owned();
        let change = dispatch2::run_on_main(move |_| {
            let provider = TranscriptProvider::new(&text, tx);
            let item = NSPasteboardItem::new();
            // SAFETY: an AppKit constant.
            let string_type: &NSPasteboardType = unsafe { NSPasteboardTypeString };
            let types = NSArray::from_slice(&[string_type]);
            if !item.setDataProvider_forTypes(ProtocolObject::from_ref(&*provider), &types) {
                return None;
            }
            let pasteboard = NSPasteboard::generalPasteboard();
            pasteboard.clearContents();
            let writer: Retained<ProtocolObject<dyn NSPasteboardWriting>> =
                ProtocolObject::from_retained(item);
            if !pasteboard.writeObjects(&NSArray::from_retained_slice(&[writer])) {
                return None;
            }
            PROVIDER.with(|slot| *slot.borrow_mut() = Some(provider));
            Some(pasteboard.changeCount())
        });
        let change = change.ok_or_else(|| "the pasteboard refused the transcript".to_owned())?;
        self.change = Some(change);
        self.read = Some(rx);
        Ok(())
    }

    fn expect_paste(&mut self) {
        if let Some(read) = &self.read {
            while read.try_recv().is_ok() {}
        }
    }

    fn wait_read(&mut self, deadline: Duration) -> bool {
        let read = self
            .read
            .as_ref()
            .is_some_and(|r| r.recv_timeout(deadline).is_ok());
        if read {
            // The provider runs on the main thread: one trip through the main queue lets
            // its call return (and the reader get the text) before anything changes.
            dispatch2::run_on_main(|_| ());
        }
        read && self.still_ours()
    }

    fn restore(&mut self, saved: &SavedClipboard) -> bool {
        if !self.still_ours() {
            return false;
        }
        let mut items: Vec<Retained<NSPasteboardItem>> = Vec::new();
        for format in &saved.formats {
            while items.len() <= format.item {
                items.push(NSPasteboardItem::new());
            }
            let data = NSData::with_bytes(&format.data);
            if !items[format.item].setData_forType(&data, &NSString::from_str(&format.name)) {
                return false;
            }
        }
        let writers: Vec<Retained<ProtocolObject<dyn NSPasteboardWriting>>> = items
            .into_iter()
            .map(ProtocolObject::from_retained)
            .collect();
        let pasteboard = NSPasteboard::generalPasteboard();
        pasteboard.clearContents();
        let written = pasteboard.writeObjects(&NSArray::from_retained_slice(&writers));
        self.change = None;
        written
    }
}
