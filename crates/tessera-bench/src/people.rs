//! The seed's data set: 1000 fake people in json-generator style, generated deterministically.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

const FIRST: &[&str] = &[
    "Logan", "Amie", "Lorraine", "Cochran", "Hester", "Mcdowell", "Bettye", "Ramos", "Gay", "Wilkins", "Alisha", "Morton", "Kerry",
    "Rosario", "Nadia", "Conner", "Serena", "Irma", "Petty", "Holly", "Dale", "Tania", "Rowe", "Jeanine", "Sears", "Olive", "Hines",
    "Rosalind", "Frances", "Vang", "Beach", "Dudley", "Ayers", "Kline", "Lynnette", "Francine", "Blanche", "Mcclure", "Katina", "Glass",
];
const LAST: &[&str] = &[
    "Keller", "Ortiz", "Harrell", "Faulkner", "Sosa", "Burke", "Roth", "Mcgee", "Vaughn", "Barron", "Franco", "Hale", "Pruitt", "Bonner",
    "Dalton", "Stein", "Guthrie", "Mayer", "Puckett", "Cline", "Serrano", "Head", "Ware", "Wood", "Salas", "Conway", "Ellison", "Odom",
    "Gentry", "Strong", "Jarvis", "Rice", "Perez", "Walton", "Frye", "Patel", "Lott", "Nieves", "Chase", "Bray",
];
const LOREM: &[&str] = &[
    "et",
    "occaecat",
    "consequat",
    "officia",
    "deserunt",
    "do",
    "nostrud",
    "consectetur",
    "anim",
    "esse",
    "sit",
    "ipsum",
    "dolor",
    "amet",
    "laboris",
    "fugiat",
    "magna",
    "velit",
    "eiusmod",
    "tempor",
    "aliquip",
    "ex",
    "ea",
    "commodo",
    "culpa",
    "qui",
    "in",
    "voluptate",
    "cillum",
    "nulla",
    "pariatur",
    "excepteur",
    "sint",
    "proident",
    "sunt",
    "mollit",
    "id",
    "est",
    "laborum",
    "irure",
    "reprehenderit",
    "duis",
    "aute",
    "incididunt",
    "labore",
    "dolore",
    "minim",
    "veniam",
    "quis",
    "ullamco",
    "non",
    "adipisicing",
    "elit",
    "cupidatat",
    "enim",
    "ad",
    "eu",
    "lorem",
];
const STREETS: &[&str] = &[
    "Maple Avenue",
    "Bristol Street",
    "Kermit Place",
    "Oriental Court",
    "Bergen Street",
    "Lake Place",
    "Hubbard Street",
    "Classon Avenue",
    "Dover Street",
    "Seeley Street",
    "Amity Street",
    "Sutton Street",
];
const CITIES: &[&str] =
    &["Orviston", "Vale", "Tilleda", "Cawood", "Yukon", "Sylvanite", "Rivers", "Dante", "Bluffview", "Loyalhanna", "Ribera", "Greenock"];
const STATES: &[&str] =
    &["Nebraska", "Ohio", "Virginia", "Alaska", "Georgia", "Utah", "Maine", "Oregon", "Texas", "Iowa", "Hawaii", "Florida"];
const SYLLABLES: &[&str] =
    &["zil", "la", "con", "ar", "tiq", "quo", "tex", "vel", "ox", "go", "mi", "ra", "net", "sy", "ber", "ul", "tra", "pod", "ix", "eco"];

/// One person, decoded with borrowed strings where the format allows it: `Cow` for fields that
/// may hold JSON escapes (serde_json must copy those), `&str` for tags, which never do.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Person<'a> {
    #[serde(rename = "_id", borrow)]
    pub id: Cow<'a, str>,
    pub index: u32,
    #[serde(borrow)]
    pub guid: Cow<'a, str>,
    pub is_active: bool,
    #[serde(borrow)]
    pub balance: Cow<'a, str>,
    #[serde(borrow)]
    pub picture: Cow<'a, str>,
    pub age: u8,
    #[serde(borrow)]
    pub eye_color: Cow<'a, str>,
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow)]
    pub gender: Cow<'a, str>,
    #[serde(borrow)]
    pub company: Cow<'a, str>,
    #[serde(borrow)]
    pub email: Cow<'a, str>,
    #[serde(borrow)]
    pub phone: Cow<'a, str>,
    #[serde(borrow)]
    pub address: Cow<'a, str>,
    #[serde(borrow)]
    pub about: Cow<'a, str>,
    #[serde(borrow)]
    pub registered: Cow<'a, str>,
    pub latitude: f64,
    pub longitude: f64,
    #[serde(borrow)]
    pub tags: Vec<&'a str>,
    #[serde(borrow)]
    pub friends: Vec<Friend<'a>>,
    #[serde(borrow)]
    pub greeting: Cow<'a, str>,
    #[serde(borrow)]
    pub favorite_fruit: Cow<'a, str>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Friend<'a> {
    pub id: u32,
    #[serde(borrow)]
    pub name: Cow<'a, str>,
}

fn pick<'a>(rng: &mut fastrand::Rng, list: &[&'a str]) -> &'a str {
    list[rng.usize(..list.len())]
}

fn hex(rng: &mut fastrand::Rng, digits: usize) -> String {
    (0..digits).map(|_| char::from_digit(rng.u32(..16), 16).unwrap()).collect()
}

fn full_name(rng: &mut fastrand::Rng) -> String {
    format!("{} {}", pick(rng, FIRST), pick(rng, LAST))
}

fn sentence(rng: &mut fastrand::Rng) -> String {
    let words: Vec<&str> = (0..rng.usize(6..12)).map(|_| pick(rng, LOREM)).collect();
    let mut text = words.join(" ");
    text[..1].make_ascii_uppercase();
    text + "."
}

/// `count` people as minified JSON, the same bytes for the same count on every run.
pub fn people_json(count: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(1000);
    let people: Vec<serde_json::Value> = (0..count).map(|index| person(&mut rng, index)).collect();
    serde_json::to_vec(&people).expect("serializable")
}

fn person(rng: &mut fastrand::Rng, index: usize) -> serde_json::Value {
    let name = full_name(rng);
    let company: String = (0..rng.usize(2..4)).map(|_| pick(rng, SYLLABLES)).collect::<String>().to_uppercase();
    let email = format!("{}@{}.com", name.replace(' ', "").to_lowercase(), company.to_lowercase());
    let about = (0..rng.usize(4..7)).map(|_| sentence(rng)).collect::<Vec<_>>().join(" ") + "\r\n";
    let dollars = rng.u32(1000..4000);
    serde_json::json!({
        "_id": hex(rng, 24),
        "index": index,
        "guid": format!("{}-{}-{}-{}-{}", hex(rng, 8), hex(rng, 4), hex(rng, 4), hex(rng, 4), hex(rng, 12)),
        "isActive": rng.bool(),
        "balance": format!("${},{:03}.{:02}", dollars / 1000, dollars % 1000, rng.u32(..100)),
        "picture": "http://placehold.it/32x32",
        "age": rng.u32(20..41),
        "eyeColor": pick(rng, &["blue", "brown", "green"]),
        "name": name,
        "gender": pick(rng, &["male", "female"]),
        "company": company,
        "email": email,
        "phone": format!("+1 ({}) {}-{}", rng.u32(800..1000), rng.u32(100..1000), rng.u32(1000..10000)),
        "address": format!("{} {}, {}, {}, {}", rng.u32(100..1000), pick(rng, STREETS), pick(rng, CITIES), pick(rng, STATES), rng.u32(1000..10000)),
        "about": about,
        "registered": format!("20{:02}-{:02}-{:02}T{:02}:{:02}:{:02} -0{}:00", rng.u32(14..24), rng.u32(1..13), rng.u32(1..29), rng.u32(..24), rng.u32(..60), rng.u32(..60), rng.u32(1..10)),
        "latitude": ((rng.f64() * 180.0 - 90.0) * 1e6).round() / 1e6,
        "longitude": ((rng.f64() * 360.0 - 180.0) * 1e6).round() / 1e6,
        "tags": (0..7).map(|_| pick(rng, LOREM)).collect::<Vec<_>>(),
        "friends": (0..3).map(|id| serde_json::json!({"id": id, "name": full_name(rng)})).collect::<Vec<_>>(),
        "greeting": format!("Hello, {}! You have {} unread messages.", name, rng.u32(1..11)),
        "favoriteFruit": pick(rng, &["apple", "banana", "strawberry"]),
    })
}
