//! `format` rows for number-heavy JSON: a GeoJSON-like feature collection (polygons of
//! longitude/latitude pairs with seven decimals) and a mesh-like model (flat arrays of vertex
//! coordinates, normals, texture coordinates and triangle indices), both generated here,
//! deterministically. Each gets its size beside MessagePack and CBOR and its JSON → binary time
//! beside serde_json parsing into a `Value` (issue 13, item 7: ≥ 2× serde_json, size ≤
//! MessagePack's).

use crate::harness::{Goal, Table, median_ns};
use std::fmt::Write;
use std::hint::black_box;
use tessera_value::from_json;

/// A small deterministic generator (xorshift64*), so every run converts the same text.
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[low, high)`.
    fn float(&mut self, low: f64, high: f64) -> f64 {
        low + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (high - low)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

const CATEGORIES: &[&str] = &["residential", "commercial", "park", "industrial", "water"];

/// `features` polygons (one ring each, 8 to 64 points, closed), around San Francisco.
pub fn geojson_like(features: usize) -> Vec<u8> {
    let mut numbers = Numbers(0x9E37_79B9_7F4A_7C15);
    let mut out = String::from(r#"{"type":"FeatureCollection","features":["#);
    for feature in 0..features {
        if feature > 0 {
            out.push(',');
        }
        let category = CATEGORIES[numbers.below(CATEGORIES.len() as u64) as usize];
        let population = numbers.below(20_000);
        let area = numbers.float(0.01, 12.0);
        write!(
            out,
            r#"{{"type":"Feature","id":{feature},"properties":{{"name":"Parcel {feature}","category":"{category}","population":{population},"area_km2":{area:.3}}},"geometry":{{"type":"Polygon","coordinates":[["#
        )
        .expect("write to a String");
        let (center_lon, center_lat) = (numbers.float(-122.52, -122.35), numbers.float(37.70, 37.82));
        let points = 8 + numbers.below(57) as usize;
        let mut first = String::new();
        for point in 0..points {
            let angle = point as f64 / points as f64 * std::f64::consts::TAU;
            let radius = numbers.float(0.0005, 0.004);
            let pair = format!("[{:.7},{:.7}]", center_lon + radius * angle.cos(), center_lat + radius * angle.sin());
            if point == 0 {
                first = pair.clone();
            } else {
                out.push(',');
            }
            out.push_str(&pair);
        }
        write!(out, ",{first}]]}}}}").expect("write to a String");
    }
    out.push_str("]}");
    out.into_bytes()
}

/// A mesh of `vertices` vertices: positions (6 decimals), normals and texture coordinates
/// (4 decimals) as flat arrays, and two triangles per vertex as a flat array of indices.
pub fn mesh_like(vertices: usize) -> Vec<u8> {
    let mut numbers = Numbers(0xD1B5_4A32_D192_ED03);
    let mut out = String::from(r#"{"metadata":{"version":4.5,"type":"BufferGeometry","generator":"tessera-bench"},"name":"terrain","#);
    let flat = |out: &mut String, name: &str, count: usize, decimals: usize, numbers: &mut Numbers, low: f64, high: f64| {
        write!(out, r#""{name}":["#).expect("write to a String");
        for index in 0..count {
            if index > 0 {
                out.push(',');
            }
            write!(out, "{:.*}", decimals, numbers.float(low, high)).expect("write to a String");
        }
        out.push_str("],");
    };
    flat(&mut out, "positions", vertices * 3, 6, &mut numbers, -50.0, 50.0);
    flat(&mut out, "normals", vertices * 3, 4, &mut numbers, -1.0, 1.0);
    flat(&mut out, "uvs", vertices * 2, 4, &mut numbers, 0.0, 1.0);
    out.push_str(r#""indices":["#);
    for index in 0..vertices * 6 {
        if index > 0 {
            out.push(',');
        }
        write!(out, "{}", numbers.below(vertices as u64)).expect("write to a String");
    }
    out.push_str("]}");
    out.into_bytes()
}

/// The size and conversion rows of one input.
fn input_rows(table: &mut Table, samples: usize, name: &str, json: &[u8]) {
    let parsed: serde_json::Value = serde_json::from_slice(json).expect("generated JSON is valid");
    let binary = from_json(json).expect("generated JSON is valid");
    let msgpack = rmp_serde::to_vec(&parsed).expect("msgpack");
    let mut cbor = Vec::new();
    ciborium::into_writer(&parsed, &mut cbor).expect("cbor");
    println!("{name}: {} bytes of JSON", json.len());
    table.row(
        &format!("{name}: size"),
        "bytes",
        binary.len() as f64,
        &[("rmp-serde", msgpack.len() as f64), ("ciborium", cbor.len() as f64), ("serde_json", json.len() as f64)],
        Goal::AtMostTimesPeer { peer: "rmp-serde", factor: 1.0 },
    );
    let convert_ns = median_ns(samples, 1, || {
        black_box(from_json(black_box(json)).unwrap());
    });
    let serde_json_ns = median_ns(samples, 1, || {
        black_box(serde_json::from_slice::<serde_json::Value>(black_box(json)).unwrap());
    });
    let sonic_ns = median_ns(samples, 1, || {
        black_box(sonic_rs::from_slice::<sonic_rs::Value>(black_box(json)).unwrap());
    });
    table.row(
        &format!("{name}: JSON -> binary (serde_json: parse to Value)"),
        "ms",
        convert_ns / 1e6,
        &[("serde_json", serde_json_ns / 1e6), ("sonic-rs", sonic_ns / 1e6)],
        Goal::AtMostTimesPeer { peer: "serde_json", factor: 0.5 },
    );
}

pub fn rows(table: &mut Table, samples: usize) {
    input_rows(table, samples, "GeoJSON-like, 2,000 polygons", &geojson_like(2_000));
    input_rows(table, samples, "mesh-like, 20,000 vertices", &mesh_like(20_000));
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_inputs_are_json_of_the_expected_shape() {
        let geo: serde_json::Value = serde_json::from_slice(&super::geojson_like(3)).unwrap();
        let ring = &geo["features"][2]["geometry"]["coordinates"][0];
        assert!(ring.as_array().unwrap().len() >= 9);
        assert_eq!(ring[0], ring[ring.as_array().unwrap().len() - 1], "closed ring");
        let mesh: serde_json::Value = serde_json::from_slice(&super::mesh_like(10)).unwrap();
        assert_eq!(mesh["positions"].as_array().unwrap().len(), 30);
        assert!(mesh["indices"].as_array().unwrap().iter().all(|index| index.as_u64().unwrap() < 10));
    }
}
