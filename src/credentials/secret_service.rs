//! A minimal Secret Service client (the freedesktop.org API GNOME Keyring and KWallet
//! serve on the session bus) over the zbus connection the app already links.
//!
//! Only what Persyk needs: find, read, store and delete one item by its attributes
//! (`service`, `username`, the same pair `secret-tool lookup` takes), in the default
//! collection. The transfer uses the `plain` algorithm: the secret travels unencrypted over
//! the local, per-user session bus, as with libsecret's own fallback; no extra crypto crate
//! is needed for it.
//!
//! Invariants:
//! - [`available`] only asks the bus whether the service is there (running or
//!   activatable); it never starts a prompt.
//! - A locked item or collection is unlocked through the service's own prompt; a dismissed
//!   prompt is an error, never a silent fallback to another store.
//! - Errors are unit values; nothing from the bus (and never the secret) reaches a message.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

const BUS_NAME: &str = "org.freedesktop.secrets";
const SERVICE_PATH: &str = "/org/freedesktop/secrets";
const SERVICE_IFACE: &str = "org.freedesktop.Secret.Service";
const COLLECTION_IFACE: &str = "org.freedesktop.Secret.Collection";
const ITEM_IFACE: &str = "org.freedesktop.Secret.Item";
const PROMPT_IFACE: &str = "org.freedesktop.Secret.Prompt";
/// How long an unlock prompt may stay open before the operation gives up.
const PROMPT_DEADLINE: Duration = Duration::from_secs(120);

/// The Secret Service failed (no bus, no service, a refused or dismissed prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

impl From<zbus::Error> for Failed {
    fn from(_: zbus::Error) -> Failed {
        Failed
    }
}

impl From<zbus::fdo::Error> for Failed {
    fn from(_: zbus::fdo::Error) -> Failed {
        Failed
    }
}

/// `(session, parameters, value, content type)`: the API's `Secret` struct.
type Secret = (OwnedObjectPath, Vec<u8>, Vec<u8>, String);

/// Whether the session bus offers a Secret Service (running or activatable).
pub fn available() -> bool {
    let probe = || -> Result<bool, Failed> {
        let conn = Connection::session()?;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&conn)?;
        let name = zbus::names::BusName::try_from(BUS_NAME).map_err(|_| Failed)?;
        if dbus.name_has_owner(name)? {
            return Ok(true);
        }
        Ok(dbus
            .list_activatable_names()?
            .iter()
            .any(|n| n.as_str() == BUS_NAME))
    };
    probe().unwrap_or(false)
}

struct Client {
    conn: Connection,
    session: OwnedObjectPath,
}

impl Client {
    fn open() -> Result<Client, Failed> {
        let conn = Connection::session()?;
        let reply = conn.call_method(
            Some(BUS_NAME),
            SERVICE_PATH,
            Some(SERVICE_IFACE),
            "OpenSession",
            &("plain", Value::from("")),
        )?;
        let (_, session): (OwnedValue, OwnedObjectPath) = reply.body().deserialize()?;
        Ok(Client { conn, session })
    }

    fn call<B, R>(&self, path: &str, iface: &str, method: &str, body: &B) -> Result<R, Failed>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        let reply = self
            .conn
            .call_method(Some(BUS_NAME), path, Some(iface), method, body)?;
        Ok(reply.body().deserialize()?)
    }

    /// Runs a prompt the service asked for (`"/"`: none) and waits for its answer.
    fn prompt(&self, prompt: &ObjectPath<'_>) -> Result<(), Failed> {
        if prompt.as_str() == "/" {
            return Ok(());
        }
        let proxy = Proxy::new(&self.conn, BUS_NAME, prompt.to_owned(), PROMPT_IFACE)?;
        let mut completed = proxy.receive_signal("Completed")?;
        proxy.call_method("Prompt", &(""))?;
        // The answer arrives when the user acts; wait on a thread so the wait has an end.
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::spawn(move || {
            let dismissed = completed
                .next()
                .and_then(|m| m.body().deserialize::<(bool, OwnedValue)>().ok())
                .is_none_or(|(dismissed, _)| dismissed);
            let _ = tx.send(dismissed);
        });
        match rx.recv_timeout(PROMPT_DEADLINE) {
            Ok(false) => Ok(()),
            _ => Err(Failed),
        }
    }

    /// The items with these attributes, unlocking locked ones first.
    fn items(&self, attributes: &HashMap<&str, &str>) -> Result<Vec<OwnedObjectPath>, Failed> {
        let (mut unlocked, locked): (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) =
            self.call(SERVICE_PATH, SERVICE_IFACE, "SearchItems", &(attributes,))?;
        if !locked.is_empty() {
            let (now, prompt): (Vec<OwnedObjectPath>, OwnedObjectPath) =
                self.call(SERVICE_PATH, SERVICE_IFACE, "Unlock", &(&locked,))?;
            self.prompt(&prompt)?;
            if prompt.as_str() == "/" {
                unlocked.extend(now);
            } else {
                unlocked.extend(locked);
            }
        }
        Ok(unlocked)
    }

    /// The default collection, created (with the service's prompt) if there is none.
    fn default_collection(&self) -> Result<OwnedObjectPath, Failed> {
        let alias: OwnedObjectPath =
            self.call(SERVICE_PATH, SERVICE_IFACE, "ReadAlias", &("default",))?;
        let collection = if alias.as_str() == "/" {
            let mut props: HashMap<&str, Value<'_>> = HashMap::new();
            props.insert("org.freedesktop.Secret.Collection.Label", "Login".into());
            let (created, prompt): (OwnedObjectPath, OwnedObjectPath) = self.call(
                SERVICE_PATH,
                SERVICE_IFACE,
                "CreateCollection",
                &(props, "default"),
            )?;
            self.prompt(&prompt)?;
            if created.as_str() == "/" {
                // Created through the prompt: the alias names it now.
                self.call(SERVICE_PATH, SERVICE_IFACE, "ReadAlias", &("default",))?
            } else {
                created
            }
        } else {
            alias
        };
        // A locked collection cannot take a new item.
        let (_, prompt): (Vec<OwnedObjectPath>, OwnedObjectPath) = self.call(
            SERVICE_PATH,
            SERVICE_IFACE,
            "Unlock",
            &(vec![collection.clone()],),
        )?;
        self.prompt(&prompt)?;
        Ok(collection)
    }
}

/// The secret stored under these attributes, if any.
pub fn get(attributes: &HashMap<&str, &str>) -> Result<Option<Vec<u8>>, Failed> {
    let client = Client::open()?;
    let items = client.items(attributes)?;
    let Some(first) = items.first() else {
        return Ok(None);
    };
    let secrets: HashMap<OwnedObjectPath, Secret> = client.call(
        SERVICE_PATH,
        SERVICE_IFACE,
        "GetSecrets",
        &(vec![first.clone()], &client.session),
    )?;
    Ok(secrets.into_values().next().map(|(_, _, value, _)| value))
}

/// Stores `secret` under these attributes in the default collection (replacing one there).
pub fn set(label: &str, attributes: &HashMap<&str, &str>, secret: &[u8]) -> Result<(), Failed> {
    let client = Client::open()?;
    let collection = client.default_collection()?;
    let mut props: HashMap<&str, Value<'_>> = HashMap::new();
    props.insert("org.freedesktop.Secret.Item.Label", label.into());
    props.insert(
        "org.freedesktop.Secret.Item.Attributes",
        Value::from(attributes.clone()),
    );
    let secret: Secret = (
        client.session.clone(),
        Vec::new(),
        secret.to_vec(),
        "text/plain".to_owned(),
    );
    let (_, prompt): (OwnedObjectPath, OwnedObjectPath) = client.call(
        collection.as_str(),
        COLLECTION_IFACE,
        "CreateItem",
        &(props, secret, true),
    )?;
    client.prompt(&prompt)
}

/// Deletes every item with these attributes (none is fine).
pub fn delete(attributes: &HashMap<&str, &str>) -> Result<(), Failed> {
    let client = Client::open()?;
    for item in client.items(attributes)? {
        let prompt: OwnedObjectPath = client.call(item.as_str(), ITEM_IFACE, "Delete", &())?;
        client.prompt(&prompt)?;
    }
    Ok(())
}
