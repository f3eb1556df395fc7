//! What a database file holds, by name: collections, dictionaries and document namespaces,
//! read from the names of its keyspaces (`tessera.schema`'s entries for collections,
//! `tessera.dictionary.NAME`, `tessera.documents.NAME`).

use crate::Db;
use crate::error::Result;

const DICTIONARY_PREFIX: &str = "tessera.dictionary.";
const DOCUMENTS_PREFIX: &str = "tessera.documents.";

/// The names of what a database file holds, each list sorted.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// db.dictionary()?;
/// db.documents("profiles")?;
/// let catalog = db.catalog()?;
/// assert_eq!(catalog.dictionaries, ["default"]);
/// assert_eq!(catalog.documents, ["profiles"]);
/// assert!(catalog.collections.is_empty());
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Collections with a stored schema.
    pub collections: Vec<String>,
    /// Dictionaries.
    pub dictionaries: Vec<String>,
    /// Document namespaces ([`Db::documents`]).
    pub documents: Vec<String>,
    /// Keyspaces the application named ([`Db::keyspace`]).
    pub keyspaces: Vec<String>,
}

impl Db {
    /// Lists what the file holds (see [`Catalog`]). Works on a read-only handle.
    ///
    /// ```
    /// use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Task { #[record(key)] id: u32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// db.collection::<Task>()?;
    /// db.keyspace("sessions")?;
    /// let catalog = db.catalog()?;
    /// assert_eq!((catalog.collections, catalog.keyspaces), (vec!["Task".to_owned()], vec!["sessions".to_owned()]));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn catalog(&self) -> Result<Catalog> {
        let mut catalog = Catalog::default();
        for name in self.keyspace_names()? {
            if let Some(dictionary) = name.strip_prefix(DICTIONARY_PREFIX) {
                catalog.dictionaries.push(dictionary.to_owned());
            } else if let Some(namespace) = name.strip_prefix(DOCUMENTS_PREFIX) {
                catalog.documents.push(namespace.to_owned());
            } else if !name.starts_with("tessera.") {
                catalog.keyspaces.push(name);
            }
        }
        let Some(schemas) = super::keyspace_if_present(self, crate::collection::SCHEMA_KEYSPACE)? else {
            return Ok(sorted(catalog));
        };
        catalog.collections = self.read(|tx| {
            let mut names = Vec::new();
            for entry in tx.range(&schemas, ..)? {
                let (name, _) = entry?;
                names.push(String::from_utf8_lossy(name).into_owned());
            }
            Ok(names)
        })?;
        Ok(sorted(catalog))
    }
}

fn sorted(mut catalog: Catalog) -> Catalog {
    catalog.collections.sort();
    catalog.dictionaries.sort();
    catalog.documents.sort();
    catalog.keyspaces.sort();
    catalog
}
